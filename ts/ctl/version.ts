// netplugctl version, and the rule that a netplugctl older than the cluster does not write: after
// an upgrade, an old tool may not know what the new release stores (the spec's upgrade rule).
import { CLUSTER_INFO_KEY } from '../model/cluster-information.ts';
import { compareVersions } from '../model/release-versions.ts';
import { readClusterInfo, readNodeVersions, type RecordedVersion } from '../ipam/cluster-info.ts';
import type { Store } from '../store/store.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { table } from './table.ts';
import { refused } from './usage.ts';

const LABEL_WIDTH = 19;
const line = (label: string, value: string) => `${`${label}:`.padEnd(LABEL_WIDTH)}${value}\n`;

/** The client's version alone (--client, or before the cluster is read). */
export function clientVersion(json: boolean): string {
  return json ? `${JSON.stringify({ clientVersion: NETPLUG_VERSION })}\n` : line('Client Version', NETPLUG_VERSION);
}

/** What a node that records no release shows (an agent from before nodes recorded theirs, or none started yet). */
const NONE_RECORDED = '(none recorded)';

/**
 * Client and cluster versions, the cluster type, and the release each node records (the cluster's
 * version is the lowest of them); thrown as VersionUnknown when the cluster has no ClusterInformation.
 */
export async function versions(store: Store, json: boolean): Promise<string> {
  let info: Awaited<ReturnType<typeof readClusterInfo>>;
  try {
    info = await readClusterInfo(store);
  } catch (err) {
    throw new VersionUnknown(clientVersion(json), `cannot read the cluster's version: ${(err as Error).message}`);
  }
  if (!info) {
    throw new VersionUnknown(
      clientVersion(json),
      `the cluster's version is unknown: ${store.description} has no ClusterInformation "default" (${CLUSTER_INFO_KEY}); netplug-node has not started on any node yet, or netplug is not installed`,
    );
  }
  let nodes: RecordedVersion[] | undefined;
  let nodesProblem: string | undefined;
  try {
    nodes = await readNodeVersions(store);
  } catch (err) {
    // The versions are known all the same: said, and why the nodes are not.
    nodesProblem = `the nodes' versions cannot be read: ${(err as Error).message.split('\n')[0]}`;
  }
  if (json)
    return `${JSON.stringify({
      clientVersion: NETPLUG_VERSION,
      clusterVersion: info.netplugVersion,
      clusterType: info.clusterType,
      ...(nodes ? { nodes: nodes.map(({ node, version }) => ({ name: node, version: version ?? null })) } : { nodesProblem }),
    })}\n`;
  const head = `${line('Client Version', NETPLUG_VERSION)}${line('Cluster Version', info.netplugVersion)}${line('Cluster Type', info.clusterType)}`;
  if (!nodes) return `${head}${line('Nodes', nodesProblem ?? '')}`;
  if (nodes.length === 0) return head;
  return `${head}\n${table(
    ['NODE', 'VERSION'],
    nodes.map(({ node, version }) => [node, version ?? NONE_RECORDED]),
  )}`;
}

/**
 * Refuses a write when this netplugctl is older than the release that runs the cluster. A newer
 * client may write; a cluster whose version is not recorded (or not readable as such) is not checked.
 */
export async function refuseOlderClient(store: Store, allowMismatch: boolean): Promise<void> {
  if (allowMismatch) return;
  let cluster: string | undefined;
  try {
    cluster = (await readClusterInfo(store))?.netplugVersion;
  } catch (err) {
    // The datastore answered but has no ClusterInformation resource (an install from before it): nothing to compare.
    if (['StoreError', 'IpamError', 'KubeError'].includes((err as Error).name)) return;
    throw err;
  }
  if (!cluster) return;
  const order = compareVersions(NETPLUG_VERSION, cluster);
  if (order !== undefined && order < 0) {
    throw refused(
      `netplugctl ${NETPLUG_VERSION} is older than the cluster's netplug ${cluster}: use netplugctl ${cluster} or newer, or add --allow-version-mismatch to write anyway`,
    );
  }
}

/** The cluster's version could not be read: the client's goes to stdout, the reason to stderr, exit 1. */
export class VersionUnknown extends Error {
  override readonly name = 'VersionUnknown';
  readonly report: string;

  constructor(report: string, message: string) {
    super(message);
    this.report = report;
  }
}
