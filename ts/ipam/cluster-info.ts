// ClusterInformation `default`: which netplug release runs the cluster, and what kind of cluster
// it is. Every netplug-node writes it at start-up (the reference's EnsureInitialized), after
// recording its own release on its node: the cluster's version is the lowest any node records
// (ts/model/release-versions.ts), so that it says the new release only once every node runs it.
// netplugctl reads it to print the cluster's version and to refuse writes by a client older than
// the cluster.
import { randomUUID } from 'node:crypto';

import { ErrorCode } from '../cni/errors.ts';
import {
  CLUSTER_INFO_KEY,
  checkedClusterInfo,
  datastoreLocked,
  type ClusterInfoResource,
  type ClusterInfoSpec,
} from '../model/cluster-information.ts';
import { API_VERSION, type Entry } from '../model/entry.ts';
import { keys } from '../model/keys.ts';
import { clusterVersionOf, recordedVersionOf } from '../model/release-versions.ts';
import { retryOnConflict, type Store } from '../store/store.ts';
import type { Precondition } from './allocator.ts';
import { IpamError } from './errors.ts';

/** The cluster's ClusterInformation, or undefined when no node agent has written one yet. */
export async function readClusterInfo(store: Store): Promise<ClusterInfoSpec | undefined> {
  const entry = await store.get(CLUSTER_INFO_KEY);
  return entry && checkedClusterInfo(entry).value.spec;
}

export interface RecordedVersion {
  node: string;
  /** The release its agent recorded; undefined when it recorded none. */
  version: string | undefined;
}

/** Each node the datastore knows (on the Kubernetes datastore, every Node), by name, with the release it records. */
export async function readNodeVersions(store: Store): Promise<RecordedVersion[]> {
  return (await store.list(keys.nodes))
    .map((entry) => ({ node: entry.key.slice(keys.nodes.length), version: recordedVersionOf(entry.value) }))
    .sort((a, b) => a.node.localeCompare(b.node));
}

/**
 * Creates ClusterInformation `default` if missing (a new GUID, datastoreReady true); else sets
 * its version to the lowest the nodes record (`version` being this agent's, recorded on its node
 * before), adds the types of `clusterType` it lacks, and fills fields left out. Retried on a
 * conflict: every node agent of the cluster does this at once after a rollout. The nodes are read
 * after ClusterInformation, so the last agent to write has read every record made before it wrote.
 * Nodes that cannot be read (`unread` is told why) count as one that records nothing: the version
 * then never rises, and the agent is not held up by what only the version needs.
 */
export async function ensureClusterInfo(
  store: Store,
  version: string,
  clusterType: string,
  unread: (reason: string) => void = () => undefined,
  now = new Date(),
): Promise<ClusterInfoSpec> {
  return retryOnConflict('ensuring ClusterInformation "default"', async () => {
    const stored = await store.get(CLUSTER_INFO_KEY);
    const recorded = await readNodeVersions(store).then(
      (nodes) => nodes.map((node) => node.version),
      (err: Error) => {
        unread(err.message.split('\n')[0] ?? '');
        return [undefined];
      },
    );
    if (!stored) {
      const spec: ClusterInfoSpec = {
        clusterGUID: newClusterGuid(),
        clusterType: unionTypes('', clusterType),
        netplugVersion: clusterVersionOf(recorded, undefined, version) ?? version,
        datastoreReady: true,
        variant: 'netplug',
      };
      const created: ClusterInfoResource = {
        kind: 'ClusterInformation',
        apiVersion: API_VERSION,
        metadata: { name: 'default', creationTimestamp: now.toISOString() },
        spec,
      };
      return (await store.commit([{ key: CLUSTER_INFO_KEY, create: created }])) ? spec : undefined;
    }
    const entry = checkedClusterInfo(stored);
    const current = entry.value.spec;
    const spec: ClusterInfoSpec = {
      ...current,
      clusterGUID: current.clusterGUID || newClusterGuid(),
      clusterType: unionTypes(current.clusterType, clusterType),
      netplugVersion: clusterVersionOf(recorded, current.netplugVersion || undefined, version) ?? version,
      variant: current.variant || 'netplug',
    };
    // Compared with what is stored, so that a field left out is written too.
    const raw = (stored.value as { spec: Record<string, unknown> }).spec;
    if (Object.entries(spec).every(([field, value]) => raw[field] === value)) return spec;
    const updated = { ...entry.value, spec };
    return (await store.commit([{ key: entry.key, update: updated, revision: entry.revision }])) ? spec : undefined;
  });
}

/**
 * Brings ClusterInformation's version to the lowest the nodes record, when a node is gone (the
 * node controller): another agent's start may be long off. Nothing when there is no
 * ClusterInformation (the agents create it); says what changed.
 */
export async function settleClusterVersion(store: Store): Promise<{ from: string; to: string } | undefined> {
  return retryOnConflict('settling the version of ClusterInformation "default"', async () => {
    const stored = await store.get(CLUSTER_INFO_KEY);
    if (!stored) return null;
    const entry = checkedClusterInfo(stored);
    const from = entry.value.spec.netplugVersion;
    const recorded = (await readNodeVersions(store)).map((node) => node.version);
    const to = clusterVersionOf(recorded, from || undefined);
    if (to === undefined || to === from) return null;
    const raw = stored.value as { spec: Record<string, unknown> };
    const updated = { ...(stored.value as object), spec: { ...raw.spec, netplugVersion: to } };
    return (await store.commit([{ key: entry.key, update: updated, revision: entry.revision }])) ? { from, to } : undefined;
  }).then((changed) => changed ?? undefined);
}

/**
 * Sets `datastoreReady` by compare-and-swap: false locks the datastore for a migration (ADD is
 * refused meanwhile), true unlocks it. Locking a datastore without ClusterInformation creates one
 * (netplug-node fills in its version later and keeps the lock). Says whether anything changed;
 * `missing` when unlocking a datastore that has none (which is not locked).
 */
export async function setDatastoreReady(store: Store, ready: boolean, now = new Date()): Promise<'changed' | 'unchanged' | 'missing'> {
  return retryOnConflict(`setting datastoreReady of ClusterInformation "default" to ${ready}`, async () => {
    const stored = await store.get(CLUSTER_INFO_KEY);
    if (!stored) {
      if (ready) return 'missing';
      const created: ClusterInfoResource = {
        kind: 'ClusterInformation',
        apiVersion: API_VERSION,
        metadata: { name: 'default', creationTimestamp: now.toISOString() },
        spec: { clusterGUID: newClusterGuid(), clusterType: '', netplugVersion: '', datastoreReady: false, variant: 'netplug' },
      };
      return (await store.commit([{ key: CLUSTER_INFO_KEY, create: created }])) ? 'changed' : undefined;
    }
    const raw = stored.value as { spec?: Record<string, unknown> };
    if (raw.spec?.['datastoreReady'] === ready) return 'unchanged';
    const entry = checkedClusterInfo(stored);
    const updated = { ...(stored.value as object), spec: { ...raw.spec, ...entry.value.spec, datastoreReady: ready } };
    return (await store.commit([{ key: entry.key, update: updated, revision: entry.revision }])) ? 'changed' : undefined;
  });
}

/**
 * An allocation decided on this read of ClusterInformation (not locked): its commit fails if the
 * document changed since, and a retry that finds it locked refuses. A lock landing between an
 * ADD's read and its commit so cannot let the address slip past an export (on etcd, where the
 * compare is in the commit's transaction).
 */
export function whileUnlocked(read: Entry<unknown> | undefined): Precondition {
  return {
    key: CLUSTER_INFO_KEY,
    entry: read,
    check: (entry) => {
      if (datastoreLocked(entry)) throw datastoreLockedError();
    },
  };
}

/** ADD while the datastore is locked: try again later (11), and how the lock ends. */
export function datastoreLockedError(): IpamError {
  return new IpamError(
    ErrorCode.TryAgainLater,
    'the datastore is locked for a migration (ClusterInformation "default" has datastoreReady false): new pods are networked again once it is unlocked with netplugctl datastore migrate unlock',
  );
}

/** `a,b` with the types of `added` it lacks appended, in their order; empty items dropped. */
function unionTypes(existing: string, added: string): string {
  const types = existing.split(',').filter((t) => t !== '');
  for (const type of added.split(',')) if (type !== '' && !types.includes(type)) types.push(type);
  return types.join(',');
}

const newClusterGuid = () => randomUUID().replaceAll('-', '');
