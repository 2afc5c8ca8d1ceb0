// How netplugctl upgrade reaches the cluster: plain JSON REST through @kubernetes/client-node's
// transport and configuration (ts/k8s/rest-api.ts), so every object is read and written as the
// server sent it (managedFields, unknown fields and all: the typed serialisers drop what they do
// not know) and any kind is reachable through discovery, JSON patches included.
import * as k8s from '@kubernetes/client-node';

import { type Api, ApiError, type Method, openApi, resourcePath } from '../k8s/rest-api.ts';
import { UsageError } from '../ctl/usage.ts';

export type Json = Record<string, any>;

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string | undefined;
}

/** `DaemonSet kube-system/netplug-node`, as messages name objects. */
export const describe = (ref: ObjectRef) => `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`;

export const refOf = (object: Json): ObjectRef => ({
  apiVersion: object.apiVersion,
  kind: object.kind,
  name: object.metadata?.name,
  ...(object.metadata?.namespace ? { namespace: object.metadata.namespace } : {}),
});

class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export const isNotFound = (err: unknown) => err instanceof KubeApiError && err.status === 404;
export const isConflict = (err: unknown) => err instanceof KubeApiError && (err.status === 409 || err.status === 422);

interface Resource {
  plural: string;
  namespaced: boolean;
}

export const FIELD_MANAGER = 'netplugctl';

export class UpgradeKube {
  readonly config: k8s.KubeConfig;
  /** The kubeconfig file it was loaded from (the Kubernetes datastore is opened with it too). */
  readonly kubeconfigPath: string | undefined;
  private readonly server: URL;
  private readonly api: Api;
  private readonly resources = new Map<string, Promise<Map<string, Resource>>>();

  constructor(config: k8s.KubeConfig, kubeconfigPath?: string) {
    const cluster = config.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig names no current cluster');
    this.config = config;
    this.kubeconfigPath = kubeconfigPath;
    this.server = new URL(cluster.server);
    this.api = openApi(config);
  }

  /** One request; the parsed JSON answer, or a KubeApiError with the server's message. */
  async request(method: Method, path: string, body?: unknown, contentType = 'application/json'): Promise<any> {
    try {
      return (await this.api.request(method, path, body === undefined ? {} : { body, contentType })) ?? {};
    } catch (err) {
      if (err instanceof ApiError) throw new KubeApiError(err.status, `${method} ${path.split('?')[0]}: ${err.message}`);
      throw new Error(`${this.server.origin}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private async discover(apiVersion: string): Promise<Map<string, Resource>> {
    let found = this.resources.get(apiVersion);
    if (!found) {
      const path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
      found = this.request('GET', path).then(
        (list: { resources: { name: string; kind: string; namespaced: boolean }[] }) =>
          new Map(
            list.resources.filter((r) => !r.name.includes('/')).map((r) => [r.kind, { plural: r.name, namespaced: r.namespaced }] as const),
          ),
      );
      found.catch(() => this.resources.delete(apiVersion));
      this.resources.set(apiVersion, found);
    }
    return found;
  }

  /** Forgets discovery (after CRDs were applied, new kinds are served). */
  forgetDiscovery(): void {
    this.resources.clear();
  }

  /** The collection's path (`name` absent) or the object's. */
  async pathOf(ref: Omit<ObjectRef, 'name'> & { name?: string | undefined }, allNamespaces = false): Promise<string> {
    let resource: Resource | undefined;
    try {
      resource = (await this.discover(ref.apiVersion)).get(ref.kind);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (!resource) throw new KubeApiError(404, `the server does not serve ${ref.kind} in ${ref.apiVersion}`);
    // Without a namespace, an object of a namespaced kind (or its collection) is in `default`, as
    // kubectl takes it; only a list asks for every namespace.
    const namespace = ref.namespace ?? (allNamespaces ? undefined : 'default');
    return resourcePath({ apiVersion: ref.apiVersion, resource: resource.plural, namespaced: resource.namespaced }, namespace, ref.name);
  }

  async get(ref: ObjectRef): Promise<Json> {
    return this.request('GET', await this.pathOf(ref));
  }

  /** The object, or undefined when it (or its kind) does not exist. */
  async getOrNothing(ref: ObjectRef): Promise<Json | undefined> {
    try {
      return await this.get(ref);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async list(apiVersion: string, kind: string, namespace?: string, labelSelector?: string): Promise<Json[]> {
    let path: string;
    try {
      path = await this.pathOf({ apiVersion, kind, namespace }, namespace === undefined);
    } catch (err) {
      if (isNotFound(err)) return [];
      throw err;
    }
    const query = labelSelector ? `?labelSelector=${encodeURIComponent(labelSelector)}` : '';
    return ((await this.request('GET', `${path}${query}`)).items ?? []).map((item: Json) => ({ apiVersion, kind, ...item }));
  }

  /** Server-side apply as netplugctl, taking over conflicting fields (force); `dryRun` asks the server what it would do. */
  async apply(object: Json, dryRun = false): Promise<Json> {
    const path = await this.pathOf(refOf(object));
    const query = `?fieldManager=${FIELD_MANAGER}&force=true${dryRun ? '&dryRun=All' : ''}`;
    return this.request('PATCH', `${path}${query}`, object, 'application/apply-patch+yaml');
  }

  async jsonPatch(ref: ObjectRef, operations: object[]): Promise<Json> {
    return this.request('PATCH', `${await this.pathOf(ref)}?fieldManager=${FIELD_MANAGER}`, operations, 'application/json-patch+json');
  }

  async mergePatch(ref: ObjectRef, patch: object): Promise<Json> {
    return this.request('PATCH', `${await this.pathOf(ref)}?fieldManager=${FIELD_MANAGER}`, patch, 'application/merge-patch+json');
  }

  async create(object: Json): Promise<Json> {
    const ref = refOf(object);
    return this.request('POST', `${await this.pathOf({ ...ref, name: undefined })}?fieldManager=${FIELD_MANAGER}`, object);
  }

  /** PUT: the whole object, guarded by its metadata.resourceVersion. */
  async replace(object: Json): Promise<Json> {
    return this.request('PUT', `${await this.pathOf(refOf(object))}?fieldManager=${FIELD_MANAGER}`, object);
  }

  /** Deletes; false if it was not there. A uid makes it a precondition. */
  async delete(ref: ObjectRef, uid?: string): Promise<boolean> {
    try {
      const body = uid ? { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid } } : undefined;
      await this.request('DELETE', await this.pathOf(ref), body);
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }
}

/** --kubeconfig, else KUBECONFIG, else ~/.kube/config. */
export function openUpgradeKube(kubeconfig: string | undefined, env: NodeJS.ProcessEnv): UpgradeKube {
  const path = kubeconfig || env['KUBECONFIG'] || (env['HOME'] ? `${env['HOME']}/.kube/config` : undefined);
  if (!path) throw new UsageError('no kubeconfig: give --kubeconfig FILE or set KUBECONFIG');
  const config = new k8s.KubeConfig();
  try {
    config.loadFromFile(path);
  } catch (err) {
    throw new UsageError(`--kubeconfig ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message.split('\n')[0]}`);
  }
  return new UpgradeKube(config, path);
}
