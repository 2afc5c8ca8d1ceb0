// Finding owner references to netplug's resources: every object of every listable resource the
// server serves (discovery: namespaced and cluster-scoped, built-in, custom and aggregated),
// read as metadata only, whose ownerReferences name an apiVersion in one of netplug's groups.
// Such an object is garbage collected when its owner's UID changes (a recreated pool, a
// datastore import, a restore from backup, a move to another API group).
import {
  discoverResources,
  groupOf,
  listMetadata,
  preferredResources,
  type Api,
  type ApiResource,
  type Discovery,
  type OwnerReference,
} from './owner-references-api.ts';
import type { Dependent } from './owner-references-record.ts';

/**
 * netplug's API groups: its datastore's custom resources, the operator's, and the group of
 * netplug's v3 names (projectnet.org), where a future API server would serve them.
 */
const NETPLUG_GROUPS: readonly string[] = ['crd.projectnet.org', 'operator.projectnet.org', 'projectnet.org'];

const isNetplugOwner = (reference: Pick<OwnerReference, 'apiVersion'>) => NETPLUG_GROUPS.includes(groupOf(reference.apiVersion));

/** One owner reference to a netplug resource, on the object that holds it. */
export interface FoundReference {
  dependent: Dependent;
  owner: OwnerReference;
  /** Its place in the object's ownerReferences when it was read (what the guarded patch tests). */
  index: number;
}

/** What could not be searched: references there are unknown. */
export interface Unsearched {
  /** `configmaps (v1)`, or a group version whose discovery failed. */
  what: string;
  error: string;
}

export interface FindResult {
  references: FoundReference[];
  unsearched: Unsearched[];
}

/** Lists in flight at once: enough to hide the round trips, few enough for a busy API server. */
const CONCURRENT_LISTS = 4;

export async function findIn(api: Api, discovery?: Discovery): Promise<FindResult> {
  const found = discovery ?? (await discoverResources(api));
  const unsearched: Unsearched[] = found.failed.map((failure) => ({ what: failure.apiVersion, error: failure.error }));
  const listable = preferredResources(found).filter((resource) => resource.verbs.includes('list'));
  const listed: FoundReference[][] = [];
  const queue = listable.map((resource, order) => ({ resource, order }));
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      try {
        listed[next.order] = (await listMetadata(api, next.resource)).flatMap((metadata) => referencesOf(next.resource, metadata));
      } catch (err) {
        unsearched.push({ what: describeResource(next.resource), error: err instanceof Error ? err.message : String(err) });
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENT_LISTS }, worker));
  // One object can be served by two groups (an Event in v1 and in events.k8s.io/v1): the same
  // UID. It is taken once, as the first resource in discovery order (the core group first) serves it.
  const seen = new Set<string>();
  const references = listed.flat().filter((reference) => {
    const key = `${reference.dependent.uid}/${reference.index}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  references.sort((a, b) => describeDependent(a.dependent).localeCompare(describeDependent(b.dependent)) || a.index - b.index);
  unsearched.sort((a, b) => a.what.localeCompare(b.what));
  return { references, unsearched };
}

function referencesOf(
  resource: ApiResource,
  metadata: { name: string; namespace?: string; uid: string; ownerReferences?: OwnerReference[] },
): FoundReference[] {
  const dependent: Dependent = {
    apiVersion: resource.apiVersion,
    resource: resource.resource,
    kind: resource.kind,
    namespaced: resource.namespaced,
    ...(resource.namespaced && metadata.namespace ? { namespace: metadata.namespace } : {}),
    name: metadata.name,
    uid: metadata.uid,
  };
  return (metadata.ownerReferences ?? []).flatMap((owner, index) =>
    isNetplugOwner(owner) ? [{ dependent, owner: ownerFields(owner), index }] : [],
  );
}

/** The reference's own fields, nothing else the server might add. */
function ownerFields(owner: OwnerReference): OwnerReference {
  return {
    apiVersion: owner.apiVersion,
    kind: owner.kind,
    name: owner.name,
    uid: owner.uid,
    ...(owner.controller === undefined ? {} : { controller: owner.controller }),
    ...(owner.blockOwnerDeletion === undefined ? {} : { blockOwnerDeletion: owner.blockOwnerDeletion }),
  };
}

const describeResource = (resource: Pick<ApiResource, 'apiVersion' | 'resource'>) => `${resource.resource} (${resource.apiVersion})`;

/** `ConfigMap default/cm-1`, `IPAMBlock 10.0.0.0-26`. */
export const describeDependent = (dependent: Pick<Dependent, 'kind' | 'namespace' | 'name'>) =>
  `${dependent.kind} ${dependent.namespace ? `${dependent.namespace}/` : ''}${dependent.name}`;

/** `IPPool p (crd.projectnet.org/v1)`. */
export const describeOwner = (owner: Pick<OwnerReference, 'apiVersion' | 'kind' | 'name'>) =>
  `${owner.kind} ${owner.name} (${owner.apiVersion})`;
