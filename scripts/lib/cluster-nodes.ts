// The nodes of a test cluster of several (startCluster({ nodes: 3 })): besides the first node,
// which also runs the control plane (cluster.ts), each node has its own network namespace on the
// underlay (cluster-network.ts: the first two on subnet A, the rest behind the router on subnet B),
// its own mount namespace, and in them its own containerd, kubelet and kube-proxy, reaching the API
// server at the first node's address.
//
// The mount namespace makes a node's host paths its own: a holder process (unshare --mount, then
// sleep, its argv[0] in the node's directory so that stop and the sweep find it) binds the node's
// directories under nodes/<name>/shadow over the cluster's host paths (containerd's root and state,
// the CNI directories, netplug's state, log and socket directories; test/e2e/install.ts rewrites a
// manifest's hostPaths to these), so one DaemonSet gives each node its own /opt/cni/bin,
// /etc/cni/net.d, /var/lib/netplug, /var/run/netplug and pod network namespaces, at the same paths
// everywhere, as on real machines. The holder first drops its copies of mounts that are not the
// node's (other clusters' under the temporary directory, /run/netns's), so it keeps nothing alive.
// Every mount the node's daemons make (pod network namespaces, volumes, rootfs overlays) is in that
// namespace alone and goes with it once its last process is gone (cluster-leftovers.ts kills them).
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import type { ClusterCerts } from './cluster-certs.ts';
import { kubeletArgs, kubeProxyArgs, writeContainerdConfig, type NodeLayout } from './cluster-config.ts';
import { CLUSTER_PREFIX, workerLayout } from './cluster-leftovers.ts';
import { linkSystemPlugins, SUBNETS, SUBNETS6 } from './cluster-network.ts';
import { enterNode, startDaemon, type Daemon } from './cluster-processes.ts';
import { waitFor } from './cluster-api.ts';
import { kubeconfigText } from './test-ca.ts';

const run = promisify(execFile);

export interface ClusterNode {
  /** The Node's name: the first node's is ClusterOptions.nodeName, the others' <it>-<number>. */
  name: string;
  /** Its address on the underlay (the Node's InternalIP). */
  address: string;
  /** Its IPv6 address on the underlay (the Node's second InternalIP), in a dual-stack cluster. */
  address6?: string;
  /** Its network namespace, and that namespace's path for nsenter --net. */
  netns: string;
  netnsPath: string;
  /** Runs a command in the node's network namespace (and its mount namespace); resolves to its stdout. */
  inNode(command: string, args: string[]): Promise<string>;
  /** Imports an OCI archive into this node's containerd (k8s.io namespace). */
  importImage(ociArchive: string): Promise<void>;
}

/** The host paths each node has its own of, relative to the cluster's directory (cluster.ts and test/e2e/install.ts name them). */
const NODE_HOST_PATHS = ['containerd', 'cni', 'var-lib-netplug', 'var-log-netplug', 'run-netplug'];

/** Node number `index` (1 is the control plane's): its subnet, the first two on A, the rest on B behind the router. */
export function nodeAddress(index: number): string {
  return `${SUBNETS[index <= 2 ? 0 : 1]}.${index}`;
}

/** Node number `index`'s IPv6 address in a dual-stack cluster: on subnet A's or B's /64 as its IPv4 address is. */
export function nodeAddress6(index: number): string {
  return `${SUBNETS6[index <= 2 ? 0 : 1]}::${index}`;
}

/** The network namespace of node `index` beside the first (whose namespace is named as the cluster). */
export const nodeNetns = (clusterNetns: string, index: number) => (index === 1 ? clusterNetns : `${clusterNetns}-n${index}`);

/** What a node needs of the cluster the first node started. */
export interface NodeContext {
  dir: string;
  clusterNetns: string;
  firstNodeName: string;
  /** The API server, as every node reaches it: https://<first node's address>:6443. */
  server: string;
  /** kube-proxy's --cluster-cidr: the IPv4 pod CIDR, and the IPv6 one after a comma in a dual-stack cluster. */
  clusterCidr: string;
  /** A dual-stack cluster: each node has an IPv6 address too, given to its kubelet after the IPv4 one. */
  dualStack: boolean;
  bin: (name: string) => string;
  certs: ClusterCerts;
  /** kube-proxy's client identity (one for every node). */
  proxy: { user: string; cert: string; key: string };
  /** The archives every node's containerd imports first (pause, busybox). */
  images: string[];
  sandboxImage: string;
  agentSocket: string;
  netnsDir: string;
  systemPlugins: boolean;
  /** The environment of the node's daemons (ClusterOptions.goMaxProcs). */
  daemonEnv: NodeJS.ProcessEnv;
  daemons: Daemon[];
  logs: string;
}

// Run by the holder: $0 its name (in the node's directory), $1 the cluster's directory, $2 the
// node's shadow directory, $3 the pod network namespaces' directory, $4 the file saying it is
// ready, $5 the mount prefix of every cluster, the rest the host paths to bind.
const HOLDER_SCRIPT = `set -eu
dir=$1 shadow=$2 netns=$3 ready=$4 clusters=$5
shift 5
awk '{print $5}' /proc/self/mountinfo | grep -E "^($clusters|/run/netns/)" | sort -r | while read -r mount; do
  umount -l "$mount" 2>/dev/null || true
done
for path in "$@"; do
  mkdir -p "$dir/$path" "$shadow/$path"
  mount --bind "$shadow/$path" "$dir/$path"
done
mkdir -p "$netns"
mount --bind "$netns" "$netns"
mount --make-rshared "$netns"
touch "$ready"
exec -a "$0" sleep infinity
`;

/** Starts node number `index` (2 or more): resolves when its daemons are started and the first images imported. */
export async function startNode(context: NodeContext, index: number): Promise<ClusterNode> {
  const { dir, daemons, logs } = context;
  const name = `${context.firstNodeName}-${index}`;
  const address = nodeAddress(index);
  const address6 = context.dualStack ? nodeAddress6(index) : undefined;
  const netns = nodeNetns(context.clusterNetns, index);
  const netnsPath = `/run/netns/${netns}`;
  const layout = workerLayout(dir, name);
  mkdirSync(layout.root, { recursive: true });
  const ready = join(layout.root, 'mounts-ready');
  const holder = startDaemon(enterNode(netnsPath), logs, `${name}-mounts`, 'unshare', [
    '--mount',
    '--propagation',
    'private',
    '--',
    'bash',
    '--norc',
    '-c',
    HOLDER_SCRIPT,
    join(layout.root, 'mount-holder'),
    dir,
    layout.shadow,
    context.netnsDir,
    ready,
    join(tmpdir(), CLUSTER_PREFIX),
    ...NODE_HOST_PATHS,
  ]);
  daemons.push(holder);
  await waitFor(`${name}'s mount namespace`, daemons, async () => existsSync(ready));
  const enter = enterNode(netnsPath, `/proc/${holder.pid}/ns/mnt`);
  const start = (daemon: string, command: string, args: string[], env?: NodeJS.ProcessEnv) =>
    daemons.push(startDaemon(enter, logs, `${name}-${daemon}`, command, args, env ?? context.daemonEnv));

  // Paths as the node's daemons see them (the cluster's, shadowed), but the runc root and the
  // node's own files, which the first node's stop reads from outside.
  const node: NodeLayout = {
    dir,
    ownDir: layout.root,
    containerdSocket: join(dir, 'containerd/containerd.sock'),
    runcRoot: layout.runcRoot,
    cniBinDir: join(dir, 'cni/bin'),
    cniConfDir: join(dir, 'cni/net.d'),
    sandboxImage: context.sandboxImage,
  };
  mkdirSync(join(layout.shadow, 'cni/bin'), { recursive: true });
  mkdirSync(join(layout.shadow, 'cni/net.d'), { recursive: true });
  if (context.systemPlugins) linkSystemPlugins(join(layout.shadow, 'cni/bin'));
  start('containerd', 'containerd', ['--config', writeContainerdConfig(node)], {
    ...context.daemonEnv,
    NETPLUG_AGENT_SOCKET: context.agentSocket,
  });
  // The same socket, from outside the node's mount namespace.
  const socket = join(layout.shadow, 'containerd/containerd.sock');
  const importImage = async (archive: string) => {
    await run('ctr', ['--address', socket, '--namespace', 'k8s.io', 'images', 'import', archive]);
  };
  const kubelet = await context.certs.identity(`system:node:${name}`, 'system:nodes', context.server);
  const proxyKubeconfig = join(layout.root, 'kube-proxy.kubeconfig');
  const { user, cert, key } = context.proxy;
  writeFileSync(proxyKubeconfig, kubeconfigText(context.server, context.certs.ca, user, cert, key));
  await waitFor(`${name}'s containerd`, daemons, async () => existsSync(socket));
  const imported = Promise.all(context.images.map(importImage));
  imported.catch(() => undefined);
  start(
    'kubelet',
    context.bin('kubelet'),
    kubeletArgs(node, context.certs.ca, kubelet.kubeconfig, name, address6 ? `${address},${address6}` : address),
  );
  start('kube-proxy', context.bin('kube-proxy'), kubeProxyArgs(proxyKubeconfig, name, context.clusterCidr));
  await imported;
  return {
    name,
    address,
    ...(address6 ? { address6 } : {}),
    netns,
    netnsPath,
    inNode: async (command, args) => (await run('nsenter', [...enter, '--', command, ...args], { maxBuffer: 64 << 20 })).stdout,
    importImage,
  };
}
