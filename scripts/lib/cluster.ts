// A real single-node Kubernetes cluster for the tests (real-node.md's recipe): etcd,
// kube-apiserver, containerd 1.6 + runc, kubelet, kube-controller-manager (allocating the Node's
// pod CIDR), kube-scheduler and kube-proxy (iptables mode, so pods and host-network pods reach
// the API server through the `kubernetes` Service), all inside one private network namespace
// where the node's address sits on a veth pair. Nothing touches the host's links, routes or
// iptables, default ports cannot clash with anything else on the machine, and stop() removes
// every process, mount, container, cgroup and host path the cluster made (cluster-leftovers.ts).
// Binaries come from scripts/kube-binaries.sh and scripts/kube-apiserver.sh, built from the Go
// module proxy; images are written locally (cluster-images.ts). Unlike real-node.md, pod network
// namespaces live under containerd's state directory (CNI_NETNS=<dir>/containerd/state/...), not
// /var/run/netns: every one of them is the cluster's own to remove, even after a crash.
// With `nodes` above one, the node runs beside others, each with its own kubelet, containerd,
// kube-proxy, network and mount namespaces, on two subnets behind a router (cluster-nodes.ts);
// with `dualStack` too, the cluster is IPv4 and IPv6: pod and service CIDRs of both families, and
// an IPv6 underlay beside the IPv4 one (subnets A and B each with an IPv6 /64, the router
// forwarding IPv6 between them, each node's kubelet given both addresses).
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';

import { makeClusterCerts } from './cluster-certs.ts';
import { kubeconfigText } from './test-ca.ts';
import {
  apiServerArgs,
  controllerManagerArgs,
  kubeletArgs,
  kubeProxyArgs,
  writeContainerdConfig,
  type NodeLayout,
} from './cluster-config.ts';
import { BUSYBOX_IMAGE, buildClusterImages, PAUSE_IMAGE } from './cluster-images.ts';
import { CLUSTER_PREFIX, recordHostPaths, removeClusterLeftovers, runcRootOf } from './cluster-leftovers.ts';
import { enterNode, startDaemon, type Daemon } from './cluster-processes.ts';
import { apiGet, listenRelay, waitFor } from './cluster-api.ts';
import { drainWorkloads } from './cluster-drain.ts';
import { linkSystemPlugins, makeNodeNetwork, makeRouter, plugNode } from './cluster-network.ts';
import { nodeAddress, nodeAddress6, nodeNetns, startNode, type ClusterNode, type NodeContext } from './cluster-nodes.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const run = promisify(execFile);

/** Addresses inside the cluster's network namespace (so they clash with nothing outside it). */
const NODE_IP = '10.250.0.1';
export const CLUSTER_CIDR = '10.244.0.0/16';
const SERVICE_CIDR = '10.96.0.0/16';
/** A dual-stack cluster's IPv6 pod CIDR (each Node's IPv6 pod CIDR a /64 of it) and service CIDR. */
export const CLUSTER_CIDR6 = 'fd00:10:244::/56';
const SERVICE_CIDR6 = 'fd00:10:96::/112';
/** The `kubernetes` Service's ClusterIP: the first address of SERVICE_CIDR. */
export const API_SERVICE_IP = '10.96.0.1';
const API_PORT = 6443;

export { BUSYBOX_IMAGE, type ClusterNode };

export interface ClusterOptions {
  /** The Node's name; netplug-node by default. */
  nodeName?: string;
  /** containerd's CNI plugin directory; by default one of the cluster's own. */
  cniBinDir?: string;
  /** containerd's CNI configuration directory (max_conf_num 1); by default one of the cluster's own, empty. */
  cniConfDir?: string;
  /** Links Debian's reference plugins (/usr/lib/cni: ptp, host-local, portmap ...) into cniBinDir; true by default. */
  systemPlugins?: boolean;
  /**
   * The propagation of the mount that holds pod network namespaces: `shared` (default) as on a
   * systemd host, where a pod may mount it with HostToContainer propagation (earlier releases'
   * netplug-node did); `private` as on a host without systemd, where containerd refuses that.
   */
  netnsMount?: 'shared' | 'private';
  /**
   * How many nodes (1 by default). With more, this node (the control plane's, 10.250.0.1) and the
   * second (10.250.0.2) share subnet A; the others are on subnet B (10.250.1.<n>) behind a router.
   * Every node's CNI directories and netplug's host paths are its own, at the same paths.
   */
  nodes?: number;
  /**
   * A dual-stack cluster (with `nodes` above one): pod CIDRs CLUSTER_CIDR and CLUSTER_CIDR6 (each
   * Node gets a /24 and a /64), service CIDRs 10.96.0.0/16 and fd00:10:96::/112 (the `kubernetes`
   * Service stays IPv4), and each node an IPv6 address beside its IPv4 one: fd00:250:0::<n> on
   * subnet A, fd00:250:1::<n> on subnet B, the router at ::fe of each, forwarding between them and
   * knowing no pod address. False by default.
   */
  dualStack?: boolean;
  /**
   * GOMAXPROCS of the nodes' Go programs (etcd, kube-apiserver, containerd and its shims, the
   * kubelet, the controllers, kube-proxy) and of kubectl; unset by default (Go's own: one per CPU).
   * npm test sets 1: its machine runs several clusters at once on two cores, where a Go program's
   * idle processors spinning for work cost about a tenth of a cluster test's CPU.
   */
  goMaxProcs?: number;
}

export interface Cluster {
  /** Everything of the cluster lives here: npcluster-<owner pid>-<random> in the temporary directory. */
  dir: string;
  /** The node's network namespace (same name as the directory), and its path for nsenter --net. */
  netns: string;
  netnsPath: string;
  nodeName: string;
  nodeIp: string;
  /** An administrator's kubeconfig that works from the test process (outside the namespace). */
  kubeconfig: string;
  /** The same administrator, for programs run inside the namespace (kubectl here, host-network tools). */
  nodeKubeconfig: string;
  /** The API server's CA certificate. */
  ca: string;
  cniBinDir: string;
  cniConfDir: string;
  /**
   * netplug-node's CNI socket on this node (in the cluster's directory): containerd has it as
   * NETPLUG_AGENT_SOCKET, which the plugin inherits.
   */
  agentSocket: string;
  /** Where containerd mounts pod network namespaces: a mount of its own, shared or private (ClusterOptions.netnsMount). */
  netnsDir: string;
  /** Runs kubectl as the administrator; resolves to its stdout, rejects with its stderr. */
  kubectl(...args: string[]): Promise<string>;
  /** Runs a command inside the node's network namespace; resolves to its stdout. */
  inNode(command: string, args: string[]): Promise<string>;
  /** Imports an OCI archive into every node's containerd (k8s.io namespace, where the kubelet finds images). */
  importImage(ociArchive: string): Promise<void>;
  /** Every node, this one (the control plane's) first. */
  nodes: ClusterNode[];
  /** The network namespace of the router between the subnets (a cluster of several nodes only). */
  router?: string;
  /** Stops everything and removes all the cluster made; resolves to what draining the workloads took, by stage. */
  stop(): Promise<string>;
  /** Seconds from the call of startCluster to each stage of the start, for reports. */
  timings: Record<string, number>;
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const started = Date.now();
  const timings: Record<string, number> = {};
  const mark = (stage: string) => (timings[stage] = (Date.now() - started) / 1000);
  const tool = (script: string) =>
    execFileSync('sh', [join(ROOT, 'scripts', script)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  const binaries = tool('kube-binaries.sh');
  const apiserver = tool('kube-apiserver.sh');
  const bin = (name: string) => join(binaries, name);
  mark('binaries');

  const dir = mkdtempSync(join(tmpdir(), `${CLUSTER_PREFIX}${process.pid}-`));
  const netns = basename(dir);
  const netnsPath = `/run/netns/${netns}`;
  const nodeName = options.nodeName ?? 'netplug-node';
  const logs = join(dir, 'logs');
  const daemons: Daemon[] = [];
  let relay: Server | undefined;
  let stopping: Promise<string> | undefined;
  const stop = async () => {
    relay?.close();
    relay = undefined;
    await removeClusterLeftovers(dir);
  };
  const daemonEnv: NodeJS.ProcessEnv = options.goMaxProcs ? { ...process.env, GOMAXPROCS: String(options.goMaxProcs) } : process.env;
  const inNode = async (command: string, args: string[]) =>
    (await run('nsenter', [`--net=${netnsPath}`, '--', command, ...args], { maxBuffer: 64 << 20, env: daemonEnv })).stdout;
  try {
    recordHostPaths(dir);
    const count = options.nodes ?? 1;
    const others = Array.from({ length: count - 1 }, (_, i) => i + 2);
    if (count > 1 && (options.cniBinDir || options.cniConfDir))
      throw new Error('the CNI directories of a cluster of several nodes are its own');
    const dualStack = options.dualStack ?? false;
    if (dualStack && count === 1) throw new Error('a dual-stack cluster has several nodes (ClusterOptions.nodes)');
    const clusterCidr = dualStack ? `${CLUSTER_CIDR},${CLUSTER_CIDR6}` : CLUSTER_CIDR;
    const serviceCidr = dualStack ? `${SERVICE_CIDR},${SERVICE_CIDR6}` : SERVICE_CIDR;
    const nodeIp6 = dualStack ? nodeAddress6(1) : undefined;
    if (count === 1) await makeNodeNetwork(netns, NODE_IP);
    else {
      await makeRouter(`${netns}-r`, dualStack);
      await Promise.all(
        [1, ...others].map((index) =>
          plugNode(`${netns}-r`, nodeNetns(netns, index), `n${index}`, nodeAddress(index), dualStack ? nodeAddress6(index) : undefined),
        ),
      );
    }

    const node: NodeLayout = {
      dir,
      containerdSocket: join(dir, 'containerd/containerd.sock'),
      runcRoot: runcRootOf(dir),
      cniBinDir: options.cniBinDir ?? join(dir, 'cni/bin'),
      cniConfDir: options.cniConfDir ?? join(dir, 'cni/net.d'),
      sandboxImage: PAUSE_IMAGE,
    };
    mkdirSync(node.cniBinDir, { recursive: true });
    mkdirSync(node.cniConfDir, { recursive: true });
    if (options.systemPlugins ?? true) linkSystemPlugins(node.cniBinDir);

    const start = (name: string, command: string, args: string[], env?: NodeJS.ProcessEnv) =>
      daemons.push(startDaemon(enterNode(netnsPath), logs, name, command, args, env ?? daemonEnv));
    const agentSocket = join(dir, 'run-netplug/cni.sock');
    // The CRI plugin's state directory (containerd's state/<plugin id>), where netns_mounts_under_state_dir puts them.
    const netnsDir = join(dir, 'containerd/state/io.containerd.grpc.v1.cri/netns');
    mkdirSync(netnsDir, { recursive: true });
    // Removed with every other mount under the directory (removeClusterLeftovers).
    execFileSync('mount', ['--bind', netnsDir, netnsDir]);
    execFileSync('mount', [options.netnsMount === 'private' ? '--make-rprivate' : '--make-rshared', netnsDir]);
    start('etcd', 'etcd', [
      '--name=node',
      `--data-dir=${join(dir, 'etcd')}`,
      // Also on the node's address: with netplug's etcd datastore, pods (the controllers) use it too.
      `--listen-client-urls=http://127.0.0.1:2379,http://${NODE_IP}:2379`,
      '--advertise-client-urls=http://127.0.0.1:2379',
      '--listen-peer-urls=http://127.0.0.1:2380',
      '--initial-advertise-peer-urls=http://127.0.0.1:2380',
      '--initial-cluster=node=http://127.0.0.1:2380',
      '--log-level=warn',
      '--logger=zap',
    ]);
    start('containerd', 'containerd', ['--config', writeContainerdConfig(node)], { ...daemonEnv, NETPLUG_AGENT_SOCKET: agentSocket });
    const images = buildClusterImages(join(dir, 'images'), bin('pause'));
    const imported = waitFor('containerd', daemons, async () => existsSync(node.containerdSocket)).then(() =>
      Promise.all([images.pause, images.busybox].map((archive) => importInto(node.containerdSocket, archive))),
    );
    // Handled where it is awaited; a failure before that must not go unhandled meanwhile.
    imported.catch(() => undefined);
    const certs = await makeClusterCerts(join(dir, 'pki'), { nodeIp: NODE_IP, serviceIp: API_SERVICE_IP });
    const inside = `https://127.0.0.1:${API_PORT}`;
    const [admin, kubelet, proxy, scheduler, apiserverClient] = await Promise.all([
      certs.identity('netplug-test-admin', 'system:masters', inside),
      certs.identity(`system:node:${nodeName}`, 'system:nodes', inside),
      certs.identity('system:kube-proxy', undefined, inside),
      certs.identity('system:kube-scheduler', undefined, inside),
      certs.identity('kube-apiserver-kubelet-client', 'system:masters', inside),
    ]);
    mark('network, certificates, images');
    // The other nodes start meanwhile; their kubelets wait for the API server by themselves.
    const nodeContext: NodeContext = {
      dir,
      clusterNetns: netns,
      firstNodeName: nodeName,
      server: `https://${NODE_IP}:${API_PORT}`,
      clusterCidr,
      dualStack,
      bin,
      certs,
      proxy,
      images: [images.pause, images.busybox],
      sandboxImage: PAUSE_IMAGE,
      agentSocket,
      netnsDir,
      systemPlugins: options.systemPlugins ?? true,
      daemonEnv,
      daemons,
      logs,
    };
    const starting = Promise.all(others.map((index) => startNode(nodeContext, index)));
    starting.catch(() => undefined);

    start('kube-apiserver', apiserver, apiServerArgs(dir, certs, apiserverClient, { nodeIp: NODE_IP, port: API_PORT, serviceCidr }));
    // The test process reaches the API server through a relay: a Unix socket served inside the
    // namespace, and a loopback TCP port here piping to it.
    const socket = join(dir, 'apiserver.sock');
    start('relay', process.execPath, [join(ROOT, 'scripts/lib/cluster-forward.ts'), socket, '127.0.0.1', String(API_PORT)]);
    const listening = await listenRelay(socket);
    relay = listening.server;
    const outside = listening.url;
    const kubeconfig = join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfig, kubeconfigText(outside, certs.ca, admin.user, admin.cert, admin.key));
    const api = (path: string) => apiGet(outside, certs.ca, admin, path);

    const cluster: Cluster = {
      dir,
      netns,
      netnsPath,
      nodeName,
      nodeIp: NODE_IP,
      kubeconfig,
      nodeKubeconfig: admin.kubeconfig,
      ca: certs.ca,
      cniBinDir: node.cniBinDir,
      cniConfDir: node.cniConfDir,
      agentSocket,
      netnsDir,
      kubectl: (...args) =>
        inNode(bin('kubectl'), [`--kubeconfig=${admin.kubeconfig}`, `--cache-dir=${join(dir, 'kubectl-cache')}`, ...args]).catch(
          (err: { stderr?: string; message: string }) => {
            throw new Error(`kubectl ${args.join(' ')}: ${err.stderr?.trim() || err.message}`);
          },
        ),
      inNode,
      importImage: async (archive) => {
        await Promise.all(cluster.nodes.map((each) => each.importImage(archive)));
      },
      nodes: [
        {
          name: nodeName,
          address: NODE_IP,
          ...(nodeIp6 ? { address6: nodeIp6 } : {}),
          netns,
          netnsPath,
          inNode,
          importImage: (archive) => importInto(node.containerdSocket, archive),
        },
      ],
      ...(count > 1 ? { router: `${netns}-r` } : {}),
      timings,
      // Once, however often called (a SIGINT handler and a finally may both call it), and the node
      // removed even when draining its workloads fails.
      stop: () =>
        (stopping ??= (async () => {
          try {
            return await drainWorkloads(cluster.kubectl);
          } finally {
            await stop();
          }
        })()),
    };

    // The kubelet and kube-proxy wait for the API server by themselves; starting them now
    // overlaps their start with its own. They need containerd's socket.
    await waitFor('containerd', daemons, async () => existsSync(node.containerdSocket));
    start(
      'kubelet',
      bin('kubelet'),
      kubeletArgs(node, certs.ca, kubelet.kubeconfig, nodeName, nodeIp6 ? `${NODE_IP},${nodeIp6}` : NODE_IP),
    );
    start('kube-proxy', bin('kube-proxy'), kubeProxyArgs(proxy.kubeconfig, nodeName, clusterCidr));

    await waitFor('kube-apiserver', daemons, async () => (await api('/readyz')).status === 200);
    mark('kube-apiserver ready');
    // These two give up when the API server is not healthy within seconds of their start.
    start(
      'kube-controller-manager',
      bin('kube-controller-manager'),
      controllerManagerArgs(dir, certs, admin.kubeconfig, clusterCidr, serviceCidr, dualStack),
    );
    start('kube-scheduler', bin('kube-scheduler'), [
      `--kubeconfig=${scheduler.kubeconfig}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      '--profiling=false',
    ]);
    await imported;
    mark('containerd, images imported');

    cluster.nodes.push(...(await starting));
    if (others.length > 0) mark('other nodes started, images imported');

    // Ready for workloads: the Nodes registered with their pod CIDRs (one of each family in a
    // dual-stack cluster), the default service account
    // (pods are refused without it), and kube-proxy's rules for the `kubernetes` Service on each node.
    for (const { name } of cluster.nodes) {
      await waitFor(`the Node ${name} and its pod CIDR`, daemons, async () => {
        const response = await api(`/api/v1/nodes/${name}`);
        return response.status === 200 && (JSON.parse(response.body).spec?.podCIDRs ?? []).length >= (dualStack ? 2 : 1);
      });
    }
    mark(others.length > 0 ? 'Nodes registered with their pod CIDRs' : 'Node registered with its pod CIDR');
    await waitFor(
      'the default service account',
      daemons,
      async () => (await api('/api/v1/namespaces/default/serviceaccounts/default')).status === 200,
    );
    mark('default service account');
    for (const each of cluster.nodes) {
      await waitFor(`kube-proxy rules for the kubernetes Service on ${each.name}`, daemons, async () =>
        (await each.inNode('iptables-save', ['-t', 'nat']).catch(() => '')).includes('default/kubernetes:https'),
      );
    }
    mark('kube-proxy rules');
    return cluster;
  } catch (err) {
    await stop();
    throw err;
  }
}

async function importInto(containerdSocket: string, archive: string): Promise<void> {
  await run('ctr', ['--address', containerdSocket, '--namespace', 'k8s.io', 'images', 'import', archive]);
}
