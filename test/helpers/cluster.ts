// A real Kubernetes cluster (one node, or several: ClusterOptions.nodes) for a test file
// (scripts/lib/cluster.ts): started once in a before hook, stopped (everything it made removed)
// after the file's tests, pass or fail.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { TestFn } from 'ava';

import { type Cluster, type ClusterOptions, startCluster as startAnyCluster } from '../../scripts/lib/cluster.ts';

export { BUSYBOX_IMAGE, API_SERVICE_IP, CLUSTER_CIDR, type Cluster, type ClusterNode } from '../../scripts/lib/cluster.ts';

/** A cluster whose Go programs run with GOMAXPROCS=1, as npm test's (ClusterOptions.goMaxProcs says why). */
export function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  return startAnyCluster({ goMaxProcs: 1, ...options });
}

/** Registers the hooks; the returned function gives the running cluster inside tests. */
export function clusterPerFile(test: TestFn, options: ClusterOptions = {}): () => Cluster {
  let cluster: Cluster | undefined;
  test.before(async (t) => {
    // Seconds on an idle machine, a minute or two beside other clusters. The Kubernetes binaries
    // are npm test's pretest's to build: `npx ava` on a fresh clone runs `npm run pretest` first.
    t.timeout(10 * 60_000);
    cluster = await startCluster(options);
    t.log(`cluster ${cluster.netns} up: ${JSON.stringify(cluster.timings)}`);
  });
  test.after.always(async (t) => {
    const started = Date.now();
    const drained = await cluster?.stop();
    t.log(`cluster stopped in ${((Date.now() - started) / 1000).toFixed(1)} s (workloads: ${drained})`);
  });
  return () => {
    if (!cluster) throw new Error('the cluster did not start (see the before hook)');
    return cluster;
  };
}

/** Parsed `kubectl get -o json`. */
export async function getJson(cluster: Cluster, ...args: string[]): Promise<any> {
  return JSON.parse(await cluster.kubectl('get', ...args, '-o', 'json'));
}

let manifests = 0;

/** Applies a manifest given as objects (kubectl apply -f - would need stdin; a file in the cluster dir does). */
export async function apply(cluster: Cluster, ...objects: unknown[]): Promise<void> {
  const file = join(cluster.dir, `manifest-${manifests++}.json`);
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
  await cluster.kubectl('apply', '-f', file);
}

/** Debian's ptp + host-local as one conflist: addresses from `podCidr`, host-local's state in `dataDir`. */
export function ptpConflist(name: string, podCidr: string, dataDir: string): object {
  return {
    cniVersion: '1.0.0',
    name,
    plugins: [{ type: 'ptp', ipam: { type: 'host-local', ranges: [[{ subnet: podCidr }]], routes: [{ dst: '0.0.0.0/0' }], dataDir } }],
  };
}
