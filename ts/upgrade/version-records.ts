// The release each node's agent records on its node (ts/node/startup/record-version.ts), removed
// by a rollback to a release whose agents record none. Such an agent neither writes nor updates
// the record, so a stale one would keep saying that the node runs the release rolled back from
// (netplugctl version, upgrade status), and at the next upgrade the first new agent, finding every
// node recording that release, would take ClusterInformation's version to it while the other
// nodes still run the old one. Removed once the previous release runs on every node: an agent of
// this release starting before that would record its release again.
import { keys } from '../model/keys.ts';
import { compareVersions, recordedVersionOf } from '../model/release-versions.ts';
import { NODE_VERSION_ANNOTATION } from '../store/kubernetes/resources.ts';
import { openStore, type DatastoreSettings } from '../store/open.ts';
import { retryOnConflict, type Store } from '../store/store.ts';
import { readClusterInformation } from './cluster-info.ts';
import { isNotFound, type UpgradeKube } from './kube.ts';

/** The first release whose netplug-node records its release on its node. */
const RECORDS_SINCE = 'v3.31.0';

/** Whether agents of `version` record their release (a `version` that is not one counts as not). */
export const recordsNodeVersion = (version: string | undefined) =>
  version !== undefined && (compareVersions(version, RECORDS_SINCE) ?? -1) >= 0;

/** Where the records are, for the plan. */
export function versionRecordsPlace(datastore: 'kubernetes' | 'etcdv3'): { read: string; remove: string } {
  return datastore === 'kubernetes'
    ? {
        read: `LIST Nodes (annotation ${NODE_VERSION_ANNOTATION})`,
        remove: `PATCH Node <name> (merge: annotation ${NODE_VERSION_ANNOTATION} null)`,
      }
    : {
        read: `LIST ${keys.nodes} (etcd; status.netplugVersion)`,
        remove: `PUT ${keys.node('<name>')} (etcd, at its revision: without status.netplugVersion)`,
      };
}

/** The apply's part: the release each node records now. */
export async function readVersionRecords(settings: DatastoreSettings, target: string): Promise<string> {
  const read = await readClusterInformation(settings, true);
  // Said, not failed: the upgrade is done whatever the records say.
  if (!read.nodes) return `the nodes' records cannot be read in ${read.where}: ${read.problem}`;
  const others = read.nodes.filter((node) => node.version !== target);
  return `${read.nodes.length - others.length} node(s) record ${target}${others.length ? `; ${others.map((node) => `${node.node}: ${node.version ?? 'none recorded'}`).join(', ')}` : ''}`;
}

/** The rollback's part: every node's record removed, on the install's datastore; idempotent. */
export async function removeVersionRecords(kube: UpgradeKube, settings: DatastoreSettings): Promise<string> {
  if (settings.datastore_type === 'kubernetes') return removeRecordAnnotations(kube);
  const store = await openStore(settings);
  try {
    return await removeRecordsFromStore(store);
  } finally {
    store.close();
  }
}

async function removeRecordAnnotations(kube: UpgradeKube): Promise<string> {
  const recording = (await kube.list('v1', 'Node'))
    .filter((node) => node.metadata?.annotations?.[NODE_VERSION_ANNOTATION] !== undefined)
    .map((node) => node.metadata.name as string);
  return removeEach(recording, `annotation ${NODE_VERSION_ANNOTATION}`, async (name) => {
    try {
      await kube.mergePatch({ apiVersion: 'v1', kind: 'Node', name }, { metadata: { annotations: { [NODE_VERSION_ANNOTATION]: null } } });
    } catch (err) {
      // A node deleted meanwhile has no record left.
      if (!isNotFound(err)) throw err;
    }
  });
}

/** The etcd datastore's Node resources without status.netplugVersion (the rest of each kept). */
export async function removeRecordsFromStore(store: Store): Promise<string> {
  const recording = (await store.list(keys.nodes))
    .filter((entry) => recordedVersionOf(entry.value) !== undefined)
    .map((entry) => entry.key.slice(keys.nodes.length));
  return removeEach(recording, `status.netplugVersion in ${store.description}`, (name) =>
    retryOnConflict(`removing the release recorded on node "${name}"`, async () => {
      const entry = await store.get<Record<string, unknown>>(keys.node(name));
      if (!entry || recordedVersionOf(entry.value) === undefined) return true;
      const { netplugVersion: _removed, ...status } = entry.value['status'] as Record<string, unknown>;
      return (await store.commit([{ key: entry.key, update: { ...entry.value, status }, revision: entry.revision }])) || undefined;
    }).then(() => undefined),
  );
}

/** Tries every node; then one line saying which could not be done and why. */
async function removeEach(nodes: string[], what: string, remove: (node: string) => Promise<void>): Promise<string> {
  if (nodes.length === 0) return 'no node records a release';
  const failed = new Map<string, string>();
  for (const node of nodes) await remove(node).catch((err: Error) => failed.set(node, err.message.split('\n')[0] ?? ''));
  if (failed.size) {
    const removed = nodes.filter((node) => !failed.has(node));
    throw new Error(
      `cannot remove the release recorded on ${[...failed].map(([node, why]) => `node ${node} (${why})`).join(', ')}${removed.length ? `; removed on ${removed.join(', ')}` : ''}: run netplugctl upgrade rollback again once it can be`,
    );
  }
  return `the release recorded on ${nodes.length} node(s) removed (${what}: ${nodes.join(', ')})`;
}
