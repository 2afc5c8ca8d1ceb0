// npm run bench:nodes: netplug across nodes, on the three-node test cluster under real kubelets
// (scripts/lib/cluster.ts with nodes: 3; nodes 1 and 2 share subnet A, node 3 is behind a router).
// A real cluster rather than network namespaces running netplug-node by hand (bench/flows/setup.ts,
// test/helpers/nodes.ts): the Deployment part needs kubelets and the scheduler anyway, and the
// traffic then crosses what a user's does (netplug installed from its manifest, its agent's routes,
// VXLAN device and MTU file, pods made by containerd through the plugin).
//   1. Traffic (bench/nodes/traffic.ts): from node 1 to node 2, TCP throughput (Debian's iperf3)
//      and round trips (Debian's ping), pod to pod against node to node on the same links, rounds
//      interleaved, per mode: no encapsulation (the pool's vxlanMode Never), then VXLAN (Always),
//      each with pods made after the switch (MTU 1500, then 1450). Busybox pods have no iperf3:
//      the host's runs inside the pod's network namespace.
//   2. A 100-replica Deployment spread over the three nodes, timed until all Running with an
//      address (bench/nodes/deployment.ts), netplug (manifest, Kubernetes datastore, fast path)
//      against Debian's ptp + host-local on each node's spec.podCIDR (bench/nodes/clusters.ts).
// Each Deployment round gets a fresh cluster per variant (a CNI cannot be swapped cleanly on a
// running cluster, and a fresh one starts each variant from the same state); the traffic part
// reuses the first netplug cluster once its Deployment is deleted, so a run starts 2 × rounds
// clusters (about 14 minutes at the defaults here). Everything (clusters, iperf3 servers) goes at
// the end, on failure and on Ctrl-C too. Writes bench/results/nodes.{md,json,svg}; prints the
// direct and VXLAN throughput ratios and the Deployment's ratio last.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';

import type { Cluster } from '../scripts/lib/cluster.ts';
import { imageArchive, NETPLUGCTL } from '../test/e2e/install.ts';
import { cleanup, clusterWith, stopCluster, type Cni } from './nodes/clusters.ts';
import { deploy, undeploy, type Deployed } from './nodes/deployment.ts';
import { report } from './nodes/report.ts';
import { DEPLOY_ROUNDS, log } from './nodes/settings.ts';
import { trafficRounds, type ModeFacts, type Round } from './nodes/traffic.ts';

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root: the cluster runs kubelets and containerd in namespaces');
  for (const tool of ['iperf3', 'ping', 'ctr'])
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0)
      throw new Error(`${tool} is missing: npm run prebench:nodes installs it`);
  if (!existsSync(NETPLUGCTL)) throw new Error(`${NETPLUGCTL} is missing: run npm run build`);
  imageArchive();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void cleanup().finally(() => process.exit(130)));
  const loadBefore = loadavg()[0] ?? 0;
  const started = Date.now();
  const deployments: Record<Cni, Deployed[]> = { netplug: [], ptp: [] };
  let traffic: { facts: ModeFacts[]; rounds: Round[] } | undefined;
  for (let round = 0; round < DEPLOY_ROUNDS; round++) {
    for (const cni of round % 2 === 0 ? (['netplug', 'ptp'] as const) : (['ptp', 'netplug'] as const)) {
      const cluster: Cluster = await clusterWith(cni);
      try {
        const deployed = await deploy(cluster);
        deployments[cni].push(deployed);
        log(`round ${round + 1}, ${cni}: 100 replicas Running in ${deployed.seconds.toFixed(1)} s (${JSON.stringify(deployed.perNode)})`);
        if (cni === 'netplug' && !traffic) {
          await undeploy(cluster);
          traffic = await trafficRounds(cluster);
        }
      } finally {
        await stopCluster(cluster);
      }
    }
  }
  if (!traffic) throw new Error('no netplug cluster ran the traffic part (BENCH_NODES_ROUNDS must be at least 1)');
  report({ traffic, deployments, loadBefore, runSeconds: (Date.now() - started) / 1000 });
}

main()
  .catch((err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
