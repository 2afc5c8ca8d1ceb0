// netplug's release versions (v3.31.0) compared, and the cluster's version: the lowest release any
// node runs, so that a rolling upgrade is not taken for done when its first node is.

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

const isVersion = (v: string | undefined): v is string => v !== undefined && compareVersions(v, '0.0.0') !== undefined;

/** The lowest of the versions found; undefined when none is one. */
export function lowestVersion(versions: readonly (string | undefined)[]): string | undefined {
  return versions.filter(isVersion).sort((a, b) => compareVersions(a, b) as number)[0];
}

/**
 * The cluster's version: the lowest any node records. A node that records none (or no version)
 * runs an agent from before nodes recorded theirs, or has not started one yet: it counts as
 * `previous`, what ClusterInformation said, so a cluster half-upgraded from such a release keeps
 * saying that release. `own` is the version of the agent asking, whether or not its node could
 * record it. Undefined when nothing is known.
 */
export function clusterVersionOf(
  recorded: readonly (string | undefined)[],
  previous: string | undefined,
  own?: string,
): string | undefined {
  return lowestVersion([own, ...recorded.map((version) => (isVersion(version) ? version : previous))]);
}

/**
 * The release a Node document's agent recorded (status.netplugVersion; on the Kubernetes
 * datastore, read from the Node's annotation); undefined when there is none.
 */
export function recordedVersionOf(node: unknown): string | undefined {
  const status = (node as { status?: unknown } | undefined)?.status;
  const version = typeof status === 'object' && status !== null ? (status as Record<string, unknown>)['netplugVersion'] : undefined;
  return typeof version === 'string' && version !== '' ? version : undefined;
}
