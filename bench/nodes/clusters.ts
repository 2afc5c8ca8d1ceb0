// The three-node clusters of bench/nodes.ts (scripts/lib/cluster.ts with `nodes: 3`: nodes 1 and 2
// on one subnet, node 3 behind a router), each with its pod network: netplug from its manifest on
// the Kubernetes datastore (as test/e2e/multi-node.ts installs it), or Debian's ptp + host-local,
// one conflist per node on that Node's spec.podCIDR. And what the run started that must go at its
// end, on failure and on a signal too: the clusters (stop() removes everything each made) and the
// processes the bench runs inside their namespaces (iperf3's servers).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { startCluster, type Cluster } from '../../scripts/lib/cluster.ts';
import { getJson, ptpConflist } from '../../test/helpers/cluster.ts';
import { imageArchive, manifestFor, NETPLUGCTL, nodePaths, writeKubeadmConfig } from '../../test/e2e/install.ts';
import { log } from './settings.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const run = promisify(execFile);

export type Cni = 'netplug' | 'ptp';

const live = new Set<Cluster>();
const processes = new Set<ChildProcess>();

/** A process that runs until the bench stops it (or the run ends). */
export function background(command: string[]): ChildProcess {
  const child = spawn(command[0] as string, command.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  processes.add(child);
  child.once('exit', () => processes.delete(child));
  child.stderr?.resume();
  return child;
}

function killAll(): void {
  for (const child of processes) child.kill('SIGKILL');
  processes.clear();
}

/** Stops `cluster` (its processes first: they hold its pods' network namespaces). */
export async function stopCluster(cluster: Cluster): Promise<void> {
  killAll();
  const started = Date.now();
  await cluster.stop();
  live.delete(cluster);
  log(`cluster ${cluster.netns} stopped in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

/** Everything still running: the processes, then every cluster. Safe to call twice. */
export async function cleanup(): Promise<void> {
  killAll();
  await Promise.all([...live].map((cluster) => stopCluster(cluster)));
}

/** netplugctl on the cluster's Kubernetes datastore. */
export async function netplugctl(cluster: Cluster, ...args: string[]): Promise<string> {
  return (await run(NETPLUGCTL, ['--kubeconfig', cluster.kubeconfig, ...args])).stdout;
}

async function installNetplug(c: Cluster): Promise<void> {
  await c.importImage(imageArchive());
  await writeKubeadmConfig(c);
  const manifest = manifestFor(c, 'netplug.yaml', nodePaths(c));
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
  await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
  await c.kubectl('-n', 'kube-system', 'rollout', 'status', 'daemonset/netplug-node', '--timeout=300s');
  await c.kubectl('-n', 'kube-system', 'rollout', 'status', 'deployment/netplug-kube-controllers', '--timeout=300s');
}

/**
 * ptp + host-local on every node, its range the Node's spec.podCIDR (kube-controller-manager's),
 * host-local's state in a directory of the node's own. No routes between nodes: the Deployment's
 * pods need only be Running with an address, not reach each other.
 */
async function installPtp(c: Cluster): Promise<void> {
  for (const node of c.nodes) {
    const podCidr: string = (await getJson(c, 'node', node.name)).spec.podCIDR;
    const conflist = ptpConflist('bench-ptp', podCidr, join(c.dir, 'host-local', node.name));

    // The CNI configuration directory is at the same path on every node, each node's its own
    // (its mount namespace): written from inside the node.
    await node.inNode('sh', ['-c', 'printf "%s" "$1" > "$2"', 'sh', JSON.stringify(conflist), join(c.cniConfDir, '10-ptp.conflist')]);
  }
}

/** A fresh three-node cluster with `cni` installed and every Node Ready. */
export async function clusterWith(cni: Cni): Promise<Cluster> {
  const started = Date.now();
  const cluster = await startCluster({ nodes: 3, systemPlugins: cni === 'ptp' });
  live.add(cluster);
  const up = (Date.now() - started) / 1000;
  if (cni === 'netplug') await installNetplug(cluster);
  else await installPtp(cluster);
  await cluster.kubectl('wait', '--for=condition=Ready', 'node', '--all', '--timeout=300s');
  log(`cluster ${cluster.netns} with ${cni}: up in ${up.toFixed(0)} s, ready in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return cluster;
}
