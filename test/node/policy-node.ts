// One "node" enforcing network policy, for the tests that prove policy with real packets
// (policy-enforcement.test.ts, test/policy/truth-table*.test.ts): a real kube-apiserver with
// netplug's CRDs, a Node object, an identity with the shipped node and plugin roles of the
// datastore (on Kubernetes plus the policy watches), on etcd a real etcd besides, and a network
// namespace (helpers/nodes.ts, reaching the API and etcd through relays) where
// the built netplug-node runs (dist/bin/netplug-node, under `ip netns exec`) with NETPLUG_POLICY_ENFORCEMENT=true.
// Pods are network namespaces plugged into it as the plugin plugs them (a veth whose host side has
// the agent's prefix, the pod's address routed to it, proxy ARP), with Pod objects holding their
// labels, nodeName and podIPs.
// Everything goes with the file's shared teardowns.
import { execFileSync, spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import { join } from 'node:path';

import * as k8s from '@kubernetes/client-node';

import { POLICY_WATCH_RULES } from '../../ts/node/policy/follow-resources.ts';
import { CNI_PLUGIN, NODE } from '../../ts/render/objects.ts';
import { renderRbac } from '../../ts/render/rbac.ts';
import { CNI_PATH, requireBuilt, ROOT } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { nftBinary, requireRoot } from '../helpers/kernel.ts';
import { installCrds, removeIpamLockFileAfter, startKube, type Kube } from '../helpers/kube.ts';
import { makeTopology, NETPLUG_CNI, type Netns, type TestNode } from '../helpers/nodes.ts';
import { eventually } from '../helpers/eventually.ts';
import type { Teardowns } from '../helpers/shared.ts';

const NETPLUG_NODE = join(ROOT, 'dist/bin/netplug-node');
/** Where the agent's health server listens, inside the node. */
export const HEALTH_ADDR = '127.0.0.1:9099';

export interface PolicyNode {
  kube: Kube;
  /** The etcd the agent follows, on the etcd datastore. */
  etcd: EtcdServer | undefined;
  networking: k8s.NetworkingV1Api;
  node: TestNode;
  /** The router on the node's subnet (172.30.1.254): a host outside the cluster, reaching the node on its eth0. */
  router: Netns;
  /** The agent's environment (its identity, datastore, enforcement on). */
  agentEnv: Record<string, string>;
  /** Where the agent writes the endpoint status files. */
  statusDir: string;
  startAgent(): void;
  /** Stops the agent (SIGTERM); its exit code. */
  stopAgent(): Promise<number | null>;
  /** The agent's stderr so far. */
  log(): string;
  /** `nft list table inet netplug` in the node. */
  nftList(): { status: number | null; stdout: string };
  /** GET on the agent's health server, from inside the node (status 0: no answer). */
  agentGet(path: string): { status: number; text: string };
}

function shippedRules(name: string, datastore: 'kubernetes' | 'etcdv3'): k8s.V1PolicyRule[] {
  const role = renderRbac({ datastore, namespace: 'kube-system', image: 'netplug:test' }).find(
    (object) => object.kind === 'ClusterRole' && object.metadata.name === name,
  ) as { rules: k8s.V1PolicyRule[] } | undefined;
  return role?.rules ?? [];
}

/** A command in a namespace, bounded (a hung one is killed). */
export const inNs = (netns: Netns, command: string[], timeoutMs = 15_000) =>
  spawnSync('ip', ['netns', 'exec', netns.name, ...command], { encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL' });

/** A shell script in a namespace; its output, or an error with its stderr. */
export function sh(netns: Netns, script: string): string {
  const run = inNs(netns, ['sh', '-ec', script]);
  if (run.status !== 0) throw new Error(`in ${netns.name}: ${script}: ${run.stderr}`);
  return run.stdout;
}

/** The API server (and etcd), the node and its identity; the agent is not started. */
export async function startPolicyNode(
  shared: Teardowns,
  nodeName = 'pn1',
  datastore: 'kubernetes' | 'etcd' = 'kubernetes',
  /** More of the host's loopback ports the node reaches on its own loopback (a flow-log aggregator's). */
  relayPorts: number[] = [],
): Promise<PolicyNode> {
  requireRoot();
  requireBuilt();
  removeIpamLockFileAfter(shared);
  const kube = await startKube(shared);
  await installCrds(kube);
  const etcd = datastore === 'etcd' ? await startEtcd(shared) : undefined;
  const networking = kube.config.makeApiClient(k8s.NetworkingV1Api);
  await kube.core.createNode({ body: { metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName } } } });
  const roles = etcd ? 'etcdv3' : 'kubernetes';
  const identity = await kube.identityWith(etcd ? 'netplug-node-policy-etcd' : 'netplug-node-policy', [
    ...shippedRules(NODE, roles),
    ...shippedRules(CNI_PLUGIN, roles),
    // On etcd the agent follows policy there, not through the API.
    ...(etcd ? [] : POLICY_WATCH_RULES),
  ]);
  const topology = await makeTopology(shared, {
    nodes: [{ name: nodeName, subnet: 1 }],
    ports: [Number(new URL(kube.server.url).port), ...(etcd ? [Number(new URL(etcd.endpoints).port)] : []), ...relayPorts],
    datastoreNetconf: etcd
      ? { etcd_endpoints: etcd.endpoints }
      : { datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } },
    agentEnv: {},
  });
  const node = topology.nodes[0] as TestNode;
  const agentEnv = {
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    NODENAME: node.name,
    ...(etcd ? { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: etcd.endpoints } : { DATASTORE_TYPE: 'kubernetes' }),
    KUBECONFIG: identity.kubeconfig,
    NO_DEFAULT_POOLS: 'true',
    NETPLUG_NETWORKING_BACKEND: 'none',
    NETPLUG_POLICY_ENFORCEMENT: 'true',
    NETPLUG_VAR_DIR: node.varDir,
    NETPLUG_AGENT_SOCKET: join(node.varDir, 'run', 'cni.sock'),
    NETPLUG_ENDPOINT_STATUS_PATH_PREFIX: join(node.varDir, 'run'),
    NETPLUG_HEALTH_ADDR: HEALTH_ADDR,
  };
  let agent: ChildProcess | undefined;
  let log = '';
  const stopAgent = async (): Promise<number | null> => {
    const running = agent;
    agent = undefined;
    if (!running || running.exitCode !== null) return running?.exitCode ?? null;
    return new Promise((resolve) => {
      // 'close', not 'exit': its stderr read to the end, so log() holds its last lines.
      running.once('close', (code) => resolve(code));
      running.kill('SIGTERM');
      setTimeout(() => running.kill('SIGKILL'), 15_000).unref();
    });
  };
  // Stopped before the namespaces go (teardowns run last-registered first).
  shared.teardown(() => stopAgent());
  return {
    kube,
    etcd,
    networking,
    node,
    router: topology.router,
    agentEnv,
    statusDir: join(node.varDir, 'run', 'endpoint-status'),
    startAgent() {
      agent = spawn('ip', ['netns', 'exec', node.netns.name, NETPLUG_NODE], {
        env: agentEnv,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      agent.stderr?.setEncoding('utf8').on('data', (text: string) => {
        log += text;
      });
    },
    stopAgent,
    log: () => log,
    nftList: () => inNs(node.netns, [nftBinary(), 'list', 'table', 'inet', 'netplug']),
    agentGet(path) {
      // curl, not a Node process: readiness is polled, and each Node process costs far more CPU.
      const out = inNs(node.netns, ['curl', '-s', '-m', '10', '-w', '\n%{http_code}', `http://${HEALTH_ADDR}${path}`]).stdout ?? '';
      const at = out.lastIndexOf('\n');
      return { status: Number(out.slice(at + 1)) || 0, text: at < 0 ? '' : out.slice(0, at) };
    },
  };
}

/** The value of one series (`name{label="value",...}` as /metrics writes it) in a /metrics text; 0 when absent. */
export function metricValue(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/**
 * A pod's network namespace plugged into the node as the plugin plugs it: eth0 with the address,
 * a default route via the plugin's link-local gateway, and on the node the host side `hostInterface`
 * up with proxy ARP and the address routed to it. Deleted at teardown.
 */
export function plugNetns(shared: Teardowns, node: TestNode, name: string, address: string, hostInterface: string): Netns {
  const netns: Netns = { name, path: `/run/netns/${name}` };
  execFileSync('ip', ['netns', 'add', netns.name]);
  shared.teardown(() => spawnSync('ip', ['netns', 'del', netns.name]));
  execFileSync('ip', ['link', 'add', 'eth0', 'netns', netns.name, 'type', 'veth', 'peer', 'name', hostInterface, 'netns', node.netns.name]);
  sh(
    netns,
    `ip link set lo up; ip addr add ${address}/32 dev eth0; ip link set eth0 up
     ip route add 169.254.1.1 dev eth0 scope link; ip route add default via 169.254.1.1 dev eth0`,
  );
  sh(
    node.netns,
    `ip link set ${hostInterface} up; sysctl -qw net.ipv4.conf.${hostInterface}.proxy_arp=1 net.ipv4.neigh.${hostInterface}.proxy_delay=0
     ip route add ${address}/32 dev ${hostInterface}`,
  );
  return netns;
}

export interface RunningPod {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  nodeName: string;
  /** podIPs, the first one podIP. */
  addresses: string[];
  serviceAccount?: string;
  ports?: k8s.V1ContainerPort[];
}

/** A Pod object as the API holds it once the kubelet runs it: nodeName, phase Running, podIPs. */
export async function createRunningPod(kube: Kube, pod: RunningPod): Promise<void> {
  await kube.core.createNamespacedPod({
    namespace: pod.namespace,
    body: {
      metadata: { name: pod.name, labels: pod.labels },
      spec: {
        nodeName: pod.nodeName,
        ...(pod.serviceAccount ? { serviceAccountName: pod.serviceAccount } : {}),
        containers: [{ name: 'main', image: 'busybox', ...(pod.ports ? { ports: pod.ports } : {}) }],
      },
    },
  });
  const made = await kube.core.readNamespacedPod({ namespace: pod.namespace, name: pod.name });
  made.status = { ...made.status, phase: 'Running', podIP: pod.addresses[0], podIPs: pod.addresses.map((ip) => ({ ip })) };
  await kube.core.replaceNamespacedPodStatus({ namespace: pod.namespace, name: pod.name, body: made });
}

/** The port the pods' echo listeners serve. */
export const ECHO_PORT = 8080;

/** A TCP echo listener on ECHO_PORT (or `port`) in `netns`, until the file's teardown. */
export function echoListener(shared: Teardowns, netns: Netns, port = ECHO_PORT): ChildProcess {
  const script = `require('node:net').createServer((s) => { s.on('error', () => {}); s.pipe(s); }).listen(${port}, '0.0.0.0')`;
  const child = spawn('ip', ['netns', 'exec', netns.name, process.execPath, '-e', script], { stdio: 'ignore' });
  shared.teardown(() => child.kill('SIGKILL'));
  return child;
}

// A TCP connection that gets its echo. The shell's /dev/tcp under timeout (a dropped SYN would
// hang it): the suite makes thousands of these, and a Node process each cost a fifth of a second
// of CPU on the loaded machine, a shell a hundredth. Node only where the source address is chosen.
const CONNECT_SHELL = 'exec 3<>"/dev/tcp/$0/$1" || exit 1; printf ping >&3; IFS= read -r -t 1.5 -N 4 reply <&3 && [ "$reply" = ping ]';
const CONNECT_FROM = `
const [host, port, localAddress] = process.argv.slice(1);
const socket = require('node:net').connect({ port: Number(port), host, localAddress });
const fail = () => process.exit(1);
setTimeout(fail, 1500);
socket.on('error', fail);
socket.on('connect', () => socket.write('ping'));
socket.on('data', (d) => { if (String(d) === 'ping') process.exit(0); });
`;

interface Probed {
  name: string;
  netns: Netns;
  address: string;
}

/** Whether a new TCP connection from `netns` to an echo listener at `address`:`port` gets its echo; from `source` when given. */
export const connectsTo = (netns: Netns, address: string, port: number, source?: string): boolean =>
  inNs(
    netns,
    source
      ? [process.execPath, '-e', CONNECT_FROM, address, String(port), source]
      : ['timeout', '-s', 'KILL', '1.5', 'bash', '--norc', '-c', CONNECT_SHELL, address, String(port)],
  ).status === 0;

/**
 * Whether a new TCP connection from `from` to `to`'s echo listener gets its echo (a refused or
 * dropped one does not); from the source address `source` when given (one of `from`'s).
 */
export const connects = (from: Probed, to: Probed, source?: string): boolean => connectsTo(from.netns, to.address, ECHO_PORT, source);

/**
 * Connectivity settles on `expected`; a blocked pair stays so for two more tries. A connection
 * that succeeds proves the pair allowed, so an allowed pair is retried (a loaded machine can miss a
 * single try's deadline) and a blocked one is not.
 */
export async function settles(from: Probed, to: Probed, expected: boolean): Promise<boolean> {
  await eventually(`${from.name} → ${to.name} ${expected ? 'connects' : 'is blocked'}`, () => connects(from, to) === expected, {
    timeoutMs: 60_000,
    intervalMs: 200,
  });
  return expected || (!connects(from, to) && !connects(from, to));
}

/** `from` reaches `to` within a few tries (see settles). */
export const reaches = (from: Probed, to: Probed) => settles(from, to, true);

/** The host interfaces in the dispatch map `to-wl` of a listing of `inet netplug`. */
export function dispatchedIn(listing: string): string[] {
  const map = /map to-wl \{[^}]*elements = \{([^}]*)\}/s.exec(listing)?.[1] ?? '';
  return [...map.matchAll(/"?([A-Za-z0-9_.-]+)"?\s*:\s*goto/g)].map((m) => m[1] as string);
}

/**
 * A pod's CNI commands as its runtime on the node runs them: the built shim (`netplug`) in the
 * node's namespace with the pod's CNI_ARGS, reaching the node's agent on its socket. The pod's
 * network namespace is made here and deleted at teardown.
 */
export function podCni(
  shared: Teardowns,
  node: TestNode,
  pod: { netnsName: string; namespace: string; name: string; containerId: string; netconf: object },
): { netns: Netns; cni(command: string): SpawnSyncReturns<string> } {
  const netns: Netns = { name: pod.netnsName, path: `/run/netns/${pod.netnsName}` };
  execFileSync('ip', ['netns', 'add', netns.name]);
  shared.teardown(() => spawnSync('ip', ['netns', 'del', netns.name]));
  const cni = (command: string) =>
    spawnSync('ip', ['netns', 'exec', node.netns.name, NETPLUG_CNI], {
      input: JSON.stringify(pod.netconf),
      encoding: 'utf8',
      timeout: 60_000,
      killSignal: 'SIGKILL',
      env: {
        PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
        CNI_COMMAND: command,
        CNI_CONTAINERID: pod.containerId,
        CNI_NETNS: netns.path,
        CNI_IFNAME: 'eth0',
        CNI_PATH,
        CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${pod.namespace};K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${pod.containerId}`,
        NETPLUG_AGENT_SOCKET: join(node.varDir, 'run', 'cni.sock'),
      },
    });
  return { netns, cni };
}
