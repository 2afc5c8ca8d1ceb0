// netplugctl version, and the rule that a netplugctl older than the cluster does not write: after
// an upgrade, an old tool may not know what the new release stores (the spec's upgrade rule).
import { CLUSTER_INFO_KEY } from '../model/cluster-information.ts';
import { readClusterInfo } from '../ipam/cluster-info.ts';
import type { Store } from '../store/store.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { refused } from './usage.ts';

const LABEL_WIDTH = 19;
const line = (label: string, value: string) => `${`${label}:`.padEnd(LABEL_WIDTH)}${value}\n`;

/** The client's version alone (--client, or before the cluster is read). */
export function clientVersion(json: boolean): string {
  return json ? `${JSON.stringify({ clientVersion: NETPLUG_VERSION })}\n` : line('Client Version', NETPLUG_VERSION);
}

/** Client and cluster versions and the cluster type; thrown as VersionUnknown when the cluster has no ClusterInformation. */
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
  if (json)
    return `${JSON.stringify({ clientVersion: NETPLUG_VERSION, clusterVersion: info.netplugVersion, clusterType: info.clusterType })}\n`;
  return `${line('Client Version', NETPLUG_VERSION)}${line('Cluster Version', info.netplugVersion)}${line('Cluster Type', info.clusterType)}`;
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

/**
 * Semantic versions compared by major, minor, patch after dropping a leading `v` and any
 * `-prerelease` or `+build` (3.22.2 and v3.22.2 are equal); undefined when either is not one.
 */
export function compareVersions(a: string, b: string): number | undefined {
  const [x, y] = [numbers(a), numbers(b)];
  if (!x || !y) return undefined;
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number);
  return 0;
}

function numbers(version: string): number[] | undefined {
  const match = /^v?(\d+)\.(\d+)\.(\d+)$/.exec(version.trim().replace(/[+-].*$/, ''));
  return match ? match.slice(1, 4).map(Number) : undefined;
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
