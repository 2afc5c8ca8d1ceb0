// ClusterInformation `default`: which netplug release runs the cluster, what kind of cluster it is,
// and whether the datastore is locked for a migration. Written and read in
// ts/ipam/cluster-info.ts.
import { API_VERSION, type Entry } from './entry.ts';
import { badDocument } from './errors.ts';
import { keys } from './keys.ts';

export const CLUSTER_INFO_KEY = keys.clusterInformation;

export interface ClusterInfoSpec {
  /** Random, hex without dashes, as the reference writes it: set once, never changed. */
  clusterGUID: string;
  /** Comma-separated: `k8s`, `kdd` (the Kubernetes datastore), ... */
  clusterType: string;
  /** The release of the node agent that wrote last. */
  netplugVersion: string;
  datastoreReady: boolean;
  variant: string;
}

export interface ClusterInfoResource {
  kind: 'ClusterInformation';
  apiVersion: string;
  metadata: { name: 'default'; creationTimestamp: string };
  spec: ClusterInfoSpec;
}

/**
 * Whether a read of ClusterInformation `default` shows the datastore locked for a migration: only
 * an explicit `datastoreReady: false` does (a missing or unreadable document does not, so that a
 * broken one cannot stop every ADD).
 */
export function datastoreLocked(entry: Entry<unknown> | undefined): boolean {
  const spec = (entry?.value as { spec?: { datastoreReady?: unknown } } | undefined)?.spec;
  return typeof spec === 'object' && spec !== null && spec.datastoreReady === false;
}

/** The document with defaults for fields another writer left out; one that is not an object is broken. */
export function checkedClusterInfo(entry: Entry<unknown>): Entry<ClusterInfoResource> {
  const { key, value } = entry;
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (!isObject(value) || !isObject(value['spec']))
    throw badDocument(`the datastore's ClusterInformation "default" (key ${key}) is broken: it has no spec; repair or remove it`);
  const spec = value['spec'];
  const text = (field: string) => (typeof spec[field] === 'string' ? (spec[field] as string) : '');
  return {
    ...entry,
    value: {
      kind: 'ClusterInformation',
      apiVersion: typeof value['apiVersion'] === 'string' ? value['apiVersion'] : API_VERSION,
      metadata: {
        name: 'default',
        creationTimestamp: isObject(value['metadata']) ? String(value['metadata']['creationTimestamp'] ?? '') : '',
      },
      spec: {
        clusterGUID: text('clusterGUID'),
        clusterType: text('clusterType'),
        netplugVersion: text('netplugVersion'),
        datastoreReady: typeof spec['datastoreReady'] === 'boolean' ? spec['datastoreReady'] : true,
        variant: text('variant'),
      },
    },
  };
}
