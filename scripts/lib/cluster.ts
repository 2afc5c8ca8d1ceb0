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
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';

import { makeClusterCerts } from './cluster-certs.ts';
import { kubeconfigText } from './test-ca.ts';
import { writeContainerdConfig, writeKubeletConfig, type NodeLayout } from './cluster-config.ts';
import { BUSYBOX_IMAGE, buildClusterImages, PAUSE_IMAGE } from './cluster-images.ts';
import { CLUSTER_PREFIX, recordHostPaths, removeClusterLeftovers, runcRootOf } from './cluster-leftovers.ts';
import { startDaemon, type Daemon } from './cluster-processes.ts';
import { apiGet, waitFor } from './cluster-api.ts';
import { drainWorkloads } from './cluster-drain.ts';
import { linkSystemPlugins, makeNodeNetwork } from './cluster-network.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const run = promisify(execFile);

/** Addresses inside the cluster's network namespace (so they clash with nothing outside it). */
const NODE_IP = '10.250.0.1';
export const CLUSTER_CIDR = '10.244.0.0/16';
const SERVICE_CIDR = '10.96.0.0/16';
/** The `kubernetes` Service's ClusterIP: the first address of SERVICE_CIDR. */
export const API_SERVICE_IP = '10.96.0.1';
const API_PORT = 6443;

export { BUSYBOX_IMAGE };

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
  /** Imports an OCI archive into containerd's k8s.io namespace, where the kubelet finds images. */
  importImage(ociArchive: string): Promise<void>;
  /** Stops everything and removes all the cluster made. */
  stop(): Promise<void>;
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
  let stopping: Promise<void> | undefined;
  const stop = async () => {
    relay?.close();
    relay = undefined;
    await removeClusterLeftovers(dir);
  };
  const inNode = async (command: string, args: string[]) =>
    (await run('nsenter', [`--net=${netnsPath}`, '--', command, ...args], { maxBuffer: 64 << 20 })).stdout;
  try {
    recordHostPaths(dir);
    await makeNodeNetwork(netns, NODE_IP);

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
      daemons.push(startDaemon(netnsPath, logs, name, command, args, env));
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
    start('containerd', 'containerd', ['--config', writeContainerdConfig(node)], { ...process.env, NETPLUG_AGENT_SOCKET: agentSocket });
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

    start('kube-apiserver', apiserver, [
      '--etcd-servers=http://127.0.0.1:2379',
      `--secure-port=${API_PORT}`,
      // Needed: with only loopback and a veth there is no default-route address to pick otherwise.
      `--advertise-address=${NODE_IP}`,
      `--tls-cert-file=${certs.serving.cert}`,
      `--tls-private-key-file=${certs.serving.key}`,
      `--client-ca-file=${certs.ca}`,
      `--service-account-key-file=${certs.serviceAccountPub}`,
      `--service-account-signing-key-file=${certs.serviceAccountKey}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      '--allow-privileged=true',
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      `--kubelet-client-certificate=${apiserverClient.cert}`,
      `--kubelet-client-key=${apiserverClient.key}`,
      // Needed for kubectl logs/exec: the default tries the node's host name first, through DNS.
      '--kubelet-preferred-address-types=InternalIP',
      `--cert-dir=${join(dir, 'apiserver')}`,
      '--profiling=false',
    ]);
    // The test process reaches the API server through a relay: a Unix socket served inside the
    // namespace, and a loopback TCP port here piping to it.
    const socket = join(dir, 'apiserver.sock');
    start('relay', process.execPath, [join(ROOT, 'scripts/lib/cluster-forward.ts'), socket, '127.0.0.1', String(API_PORT)]);
    const listening = createServer((client) => {
      const upstream = connect(socket);
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    relay = listening;
    await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
    listening.unref();
    const address = listening.address();
    const outside = `https://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
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
      importImage: (archive) => importInto(node.containerdSocket, archive),
      timings,
      // Once, however often called (a SIGINT handler and a finally may both call it), and the node
      // removed even when draining its workloads fails.
      stop: () =>
        (stopping ??= (async () => {
          try {
            await drainWorkloads(cluster.kubectl);
          } finally {
            await stop();
          }
        })()),
    };

    // The kubelet and kube-proxy wait for the API server by themselves; starting them now
    // overlaps their start with its own. They need containerd's socket.
    await waitFor('containerd', daemons, async () => existsSync(node.containerdSocket));
    start('kubelet', bin('kubelet'), [
      `--config=${writeKubeletConfig(node, certs.ca)}`,
      `--kubeconfig=${kubelet.kubeconfig}`,
      `--root-dir=${join(dir, 'kubelet')}`,
      // Its default /var/lib/kubelet/pki does not follow --root-dir.
      `--cert-dir=${join(dir, 'kubelet-pki')}`,
      `--hostname-override=${nodeName}`,
      `--node-ip=${NODE_IP}`,
    ]);
    start('kube-proxy', bin('kube-proxy'), [
      `--kubeconfig=${proxy.kubeconfig}`,
      '--proxy-mode=iptables',
      `--cluster-cidr=${CLUSTER_CIDR}`,
      `--hostname-override=${nodeName}`,
      '--healthz-bind-address=127.0.0.1:10256',
      '--metrics-bind-address=127.0.0.1:10249',
      // Zero: leave the conntrack table size and timeouts alone (the size is host-wide).
      '--conntrack-max-per-core=0',
      '--conntrack-min=0',
      '--conntrack-tcp-timeout-established=0',
      '--conntrack-tcp-timeout-close-wait=0',
    ]);

    await waitFor('kube-apiserver', daemons, async () => (await api('/readyz')).status === 200);
    mark('kube-apiserver ready');
    // These two give up when the API server is not healthy within seconds of their start.
    start('kube-controller-manager', bin('kube-controller-manager'), [
      `--kubeconfig=${admin.kubeconfig}`,
      '--leader-elect=false',
      '--use-service-account-credentials=false',
      '--allocate-node-cidrs=true',
      `--cluster-cidr=${CLUSTER_CIDR}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      `--service-account-private-key-file=${certs.serviceAccountKey}`,
      `--root-ca-file=${certs.ca}`,
      // Its default creates /usr/libexec/kubernetes/kubelet-plugins.
      `--flex-volume-plugin-dir=${join(dir, 'volume-plugins')}`,
      '--bind-address=127.0.0.1',
      '--profiling=false',
    ]);
    start('kube-scheduler', bin('kube-scheduler'), [
      `--kubeconfig=${scheduler.kubeconfig}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      '--profiling=false',
    ]);
    await imported;
    mark('containerd, images imported');

    // Ready for workloads: the Node registered with its pod CIDR, the default service account
    // (pods are refused without it), and kube-proxy's rules for the `kubernetes` Service.
    await waitFor('the Node and its pod CIDR', daemons, async () => {
      const response = await api(`/api/v1/nodes/${nodeName}`);
      return response.status === 200 && (JSON.parse(response.body).spec?.podCIDRs ?? []).length > 0;
    });
    mark('Node registered with its pod CIDR');
    await waitFor(
      'the default service account',
      daemons,
      async () => (await api('/api/v1/namespaces/default/serviceaccounts/default')).status === 200,
    );
    mark('default service account');
    await waitFor('kube-proxy rules for the kubernetes Service', daemons, async () =>
      (await inNode('iptables-save', ['-t', 'nat']).catch(() => '')).includes('default/kubernetes:https'),
    );
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
