// The Kubernetes API as the owner-references migration needs it, through @kubernetes/client-node's
// configuration (the kubeconfig's server, credentials and TLS): discovery of every listable
// resource, lists of objects' metadata only (as the garbage collector reads them: no Secret's data
// crosses the wire), reads, JSON patches and merge patches of any resource. The typed clients
// cannot ask for metadata only, nor send a JSON patch to an arbitrary resource (ts/k8s/rest-api.ts).
import * as k8s from '@kubernetes/client-node';

import { type Api, ApiError, resourcePath } from '../k8s/rest-api.ts';

export { type Api, ApiError, openApi, resourcePath } from '../k8s/rest-api.ts';

/** An API resource (discovery), enough to build its paths. */
export interface ApiResource {
  /** `v1`, `apps/v1`, `crd.projectnet.org/v1`. */
  apiVersion: string;
  /** Plural name: `configmaps`. */
  resource: string;
  kind: string;
  namespaced: boolean;
  verbs: readonly string[];
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid: string;
  resourceVersion: string;
  ownerReferences?: OwnerReference[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface JsonPatchOperation {
  op: 'test' | 'remove' | 'add' | 'replace';
  path: string;
  value?: unknown;
}

const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';

interface DiscoveredResource {
  name: string;
  kind: string;
  namespaced: boolean;
  verbs?: string[];
}

export interface Discovery {
  /** Every resource in every served version, each group's preferred version first. */
  resources: ApiResource[];
  /** Group versions whose discovery failed (e.g. an aggregated API whose backend is down). */
  failed: { apiVersion: string; error: string }[];
}

/** Every resource of every group the server serves, subresources left out. */
export async function discoverResources(api: Api): Promise<Discovery> {
  const core = (await api.request('GET', '/api')) as { versions?: string[] };
  const groups = (await api.request('GET', '/apis')) as {
    groups?: { versions?: { groupVersion: string }[]; preferredVersion?: { groupVersion: string } }[];
  };
  const apiVersions = [
    ...(core.versions ?? []),
    ...(groups.groups ?? []).flatMap((group) => {
      const preferred = group.preferredVersion?.groupVersion;
      const others = (group.versions ?? []).map((version) => version.groupVersion).filter((version) => version !== preferred);
      return preferred ? [preferred, ...others] : others;
    }),
  ];
  const resources: ApiResource[] = [];
  const failed: { apiVersion: string; error: string }[] = [];
  for (const apiVersion of apiVersions) {
    try {
      const path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
      const list = (await api.request('GET', path)) as { resources?: DiscoveredResource[] };
      for (const found of list.resources ?? []) {
        if (found.name.includes('/')) continue;
        resources.push({ apiVersion, resource: found.name, kind: found.kind, namespaced: found.namespaced, verbs: found.verbs ?? [] });
      }
    } catch (err) {
      failed.push({ apiVersion, error: err instanceof Error ? err.message : String(err) });
    }
  }
  return { resources, failed };
}

/** Each resource once, in its group's preferred version where it is served in it (as the garbage collector watches them). */
export function preferredResources(discovery: Discovery): ApiResource[] {
  const seen = new Set<string>();
  return discovery.resources.filter((resource) => {
    const key = `${groupOf(resource.apiVersion)}/${resource.resource}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** `crd.projectnet.org` of `crd.projectnet.org/v1`; the empty string (the core group) of `v1`. */
export const groupOf = (apiVersion: string) => (apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.lastIndexOf('/')) : '');

/** The objects' metadata of a resource in all namespaces, page by page. */
export async function listMetadata(api: Api, resource: ApiResource): Promise<ObjectMeta[]> {
  const items: ObjectMeta[] = [];
  let next: string | undefined;
  do {
    const query = new URLSearchParams({ limit: '500', ...(next ? { continue: next } : {}) });
    const page = (await api.request('GET', `${resourcePath(resource)}?${query}`, { accept: METADATA_LIST })) as {
      items?: { metadata: ObjectMeta }[];
      metadata?: { continue?: string };
    };
    for (const item of page.items ?? []) items.push(item.metadata);
    next = page.metadata?.continue || undefined;
  } while (next);
  return items;
}

/** One object's metadata, or undefined when it does not exist. */
export async function readMetadata(api: Api, path: string): Promise<ObjectMeta | undefined> {
  try {
    const object = (await api.request('GET', path, {
      accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json',
    })) as {
      metadata: ObjectMeta;
    };
    return object.metadata;
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return undefined;
    throw err;
  }
}

export function jsonPatch(api: Api, path: string, operations: readonly JsonPatchOperation[]): Promise<unknown> {
  return api.request('PATCH', path, { body: operations, contentType: k8s.PatchStrategy.JsonPatch });
}

export function mergePatch(api: Api, path: string, body: object): Promise<unknown> {
  return api.request('PATCH', path, { body, contentType: k8s.PatchStrategy.MergePatch });
}
