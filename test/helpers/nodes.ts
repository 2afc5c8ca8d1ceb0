// Several "nodes" on one machine, for the routing tests: each node is a network namespace with
// one underlay interface (eth0) on a bridge in an underlay namespace of the test's own; nodes on
// the second subnet sit behind a router namespace. Each node runs its own netplug-node (the built
// dist/bin/netplug-node, started inside its namespace) and makes pods with the built CNI plugin
// inside it. Nothing is changed in the host's namespace: the test's etcd and kube-apiserver listen
// on the host's loopback, and each node reaches them on its own loopback through a relay (a TCP
// listener in the node's namespace, a unix socket across, the host's loopback behind it), so the
// same URLs work everywhere. With `ipv6` the underlay is dual-stack: each subnet also has an IPv6
// /64 (SUBNETS6), the router forwarding between them. Everything (namespaces, processes, sockets)
// is removed at teardown.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import type { ExecutionContext } from 'ava';

import { CNI_PATH, DIST_CNI, ROOT, tempDir } from './cni.ts';
import { eventually } from './eventually.ts';
import { containerId } from './kernel.ts';
import { RELAY_PROGRAM } from './relay.ts';

export const NETPLUG_NODE = join(ROOT, 'dist/bin/netplug-node');
export const NETPLUG_CNI = join(DIST_CNI, 'netplug');

/** The two underlay subnets: nodes on subnet 1 share the bridge; subnet 2 is behind the router. */
export const SUBNETS = { 1: '172.30.1', 2: '172.30.2' } as const;
/** Their IPv6 /64s, with TopologyOptions' `ipv6`: a node's address is `<subnet>::<its number>`, the router's `<subnet>::fe`. */
export const SUBNETS6 = { 1: 'fd00:30:1', 2: 'fd00:30:2' } as const;

export interface Netns {
  name: string;
  path: string;
}

export interface TestNode {
  name: string;
  netns: Netns;
  /** The underlay address, without prefix (a /24). */
  address: string;
  /** The IPv6 underlay address, without prefix (a /64), with TopologyOptions' `ipv6`. */
  address6?: string;
  subnet: 1 | 2;
  varDir: string;
  /** The agent's log so far (stderr). */
  log(): string;
  startAgent(env?: Record<string, string>): void;
  stopAgent(): Promise<void>;
}

export interface Pod {
  node: TestNode;
  pools?: string[];
  netns: Netns;
  containerId: string;
  /** The result's first address. */
  address: string;
  /** Every address of the result (without prefix): both families' on a dual-stack pod. */
  addresses: string[];
  /** A Kubernetes pod's part of its ADD and DEL, when made as one. */
  as?: PodOptions;
}

/** What makes a pod a Kubernetes pod for the plugin: CNI_ARGS naming it, and netconf fields (policy, kubernetes, feature_control). */
export interface PodOptions {
  args: string;
  netconf: Record<string, unknown>;
}

export interface Topology {
  underlay: Netns;
  router: Netns;
  nodes: TestNode[];
  /** An address outside every pool, on the router (subnet 1's side): natOutgoing's destination. */
  outside: string;
  /**
   * Makes a pod on `node` with the CNI plugin (the options' ipam, else netplug-ipam on the test's
   * datastore, from `pools` if given); `as` makes it a Kubernetes pod's ADD.
   */
  addPod(node: TestNode, pools?: string[], as?: PodOptions): Pod;
  deletePod(pod: Pod): void;
  /** Runs a command inside a namespace; its exit status and output. */
  exec(netns: Netns, command: string[], timeoutMs?: number): { status: number | null; stdout: string; stderr: string };
}

export interface TopologyOptions {
  /** Node names and subnets. */
  nodes: { name: string; subnet: 1 | 2 }[];
  /** The host-loopback ports every node reaches (etcd, kube-apiserver). */
  ports: number[];
  /** The netconf's datastore fields (etcd_endpoints, or datastore_type and kubernetes.kubeconfig). */
  datastoreNetconf: Record<string, unknown>;
  /** The agents' environment besides their node's own (KUBECONFIG, ETCD_ENDPOINTS, …). */
  agentEnv: Record<string, string>;
  /** The netconf's ipam for a pod on `node`, asked at each ADD and DEL; netplug-ipam when not given. */
  ipam?: (node: TestNode) => Record<string, unknown>;
  /** A dual-stack underlay: SUBNETS6 beside SUBNETS, the nodes and the router forwarding IPv6 too. */
  ipv6?: boolean;
}

let made = 0;

export async function makeTopology(t: Pick<ExecutionContext, 'teardown'>, options: TopologyOptions): Promise<Topology> {
  const dir = tempDir(t, 'nodes');
  const id = `${(process.pid % 10000).toString()}${made++}`;
  const namespaces: Netns[] = [];
  const netns = (label: string): Netns => {
    const name = `nprt-${label}-${id}`;
    execFileSync('ip', ['netns', 'add', name]);
    const created = { name, path: `/run/netns/${name}` };
    namespaces.push(created);
    return created;
  };
  const processes: ChildProcess[] = [];
  // Teardowns run last-registered first: processes stop before namespaces go.
  t.teardown(() => {
    for (const ns of namespaces.reverse()) spawnSync('ip', ['netns', 'del', ns.name]);
  });
  t.teardown(async () => {
    await Promise.all(processes.map(stop));
  });
  const ip = (ns: Netns, ...args: string[]) => execFileSync('ip', ['-n', ns.name, ...args]);
  const sysctl = (ns: Netns, key: string, value: string) =>
    execFileSync('ip', ['netns', 'exec', ns.name, 'sysctl', '-qw', `${key}=${value}`]);

  // The underlay: subnet 1 on a bridge; the router on it and on subnet 2's bridge.
  const underlay = netns('underlay');
  ip(underlay, 'link', 'set', 'lo', 'up');
  for (const bridge of ['br1', 'br2']) {
    ip(underlay, 'link', 'add', bridge, 'type', 'bridge');
    ip(underlay, 'link', 'set', bridge, 'up');
  }
  const plug = (ns: Netns, subnet: 1 | 2, address: string, dev = 'eth0') => {
    const port = `p${namespaces.length}${dev}`;
    ip(underlay, 'link', 'add', port, 'type', 'veth', 'peer', 'name', dev, 'netns', ns.name);
    ip(underlay, 'link', 'set', port, 'master', `br${subnet}`, 'up');
    ip(ns, 'addr', 'add', `${address}/24`, 'dev', dev);
    ip(ns, 'link', 'set', dev, 'up');
    ip(ns, 'link', 'set', 'lo', 'up');
  };
  /** With `ipv6`: an IPv6 address on `dev` too, without duplicate address detection (usable at once). */
  const plug6 = (ns: Netns, address: string, dev = 'eth0') => {
    if (!options.ipv6) return;
    ip(ns, 'addr', 'add', `${address}/64`, 'dev', dev, 'nodad');
    sysctl(ns, 'net.ipv6.conf.all.forwarding', '1');
  };
  const router = netns('router');
  plug(router, 1, `${SUBNETS[1]}.254`, 'eth0');
  plug(router, 2, `${SUBNETS[2]}.254`, 'eth1');
  sysctl(router, 'net.ipv4.ip_forward', '1');
  plug6(router, `${SUBNETS6[1]}::fe`, 'eth0');
  plug6(router, `${SUBNETS6[2]}::fe`, 'eth1');

  const exec = (ns: Netns, command: string[], timeoutMs = 30_000) => {
    const run = spawnSync('ip', ['netns', 'exec', ns.name, ...command], { encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL' });
    return { status: run.status, stdout: run.stdout ?? '', stderr: run.stderr ?? '' };
  };

  // Each node reaches the host's loopback ports through a unix socket per port, served by a
  // process of its own (this one blocks in spawnSync while the plugin runs).
  const hostRelay = spawn(process.execPath, [RELAY_PROGRAM, ...options.ports.flatMap((p) => [join(dir, `port-${p}.sock`), String(p)])], {
    stdio: 'ignore',
  });
  processes.push(hostRelay);
  for (const port of options.ports) await eventually(`the host relay of port ${port}`, () => existsSync(join(dir, `port-${port}.sock`)));

  const nodes = options.nodes.map(({ name, subnet }, index): TestNode => {
    const ns = netns(name);
    const address = `${SUBNETS[subnet]}.${index + 1}`;
    plug(ns, subnet, address);
    ip(ns, 'route', 'add', 'default', 'via', `${SUBNETS[subnet]}.254`);
    const address6 = options.ipv6 ? `${SUBNETS6[subnet]}::${index + 1}` : undefined;
    if (address6) {
      plug6(ns, address6);
      ip(ns, '-6', 'route', 'add', 'default', 'via', `${SUBNETS6[subnet]}::fe`);
    }
    // As on any Kubernetes node: the node forwards its pods' traffic.
    sysctl(ns, 'net.ipv4.ip_forward', '1');
    const relay = spawn(
      'ip',
      [
        'netns',
        'exec',
        ns.name,
        process.execPath,
        RELAY_PROGRAM,
        ...options.ports.flatMap((p) => [String(p), join(dir, `port-${p}.sock`)]),
      ],
      {
        stdio: 'ignore',
      },
    );
    processes.push(relay);
    const varDir = join(dir, name);
    let agent: ChildProcess | undefined;
    let log = '';
    return {
      name,
      netns: ns,
      address,
      ...(address6 ? { address6 } : {}),
      subnet,
      varDir,
      log: () => log,
      startAgent(env = {}) {
        agent = spawn('ip', ['netns', 'exec', ns.name, NETPLUG_NODE], {
          env: {
            PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
            NODENAME: name,
            NETPLUG_VAR_DIR: varDir,
            // Each node's own socket: the nodes share one file system.
            NETPLUG_AGENT_SOCKET: join(varDir, 'run', 'cni.sock'),
            ...options.agentEnv,
            ...env,
          },
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        agent.stderr?.setEncoding('utf8').on('data', (text: string) => {
          log += text;
        });
        processes.push(agent);
      },
      async stopAgent() {
        if (agent) await stop(agent);
        agent = undefined;
      },
    };
  });
  // Every relay listens before an agent starts. (`bash --norc`: see test/suite.test.ts.)
  for (const node of nodes)
    for (const port of options.ports)
      await eventually(
        `the relay of port ${port} in ${node.name}`,
        () => exec(node.netns, ['bash', '--norc', '-c', `exec 3<>/dev/tcp/127.0.0.1/${port}`]).status === 0,
      );

  const pods = new Set<Pod>();
  const cni = (node: TestNode, command: string, pod: { netns: Netns; containerId: string; pools?: string[]; as?: PodOptions }) => {
    const netconf = {
      cniVersion: '1.1.0',
      name: 'routes-test',
      type: 'netplug',
      nodename: node.name,
      // The MTU this node's agent writes (its pools' encapsulation taken off), as on a real node.
      mtu_file: join(node.varDir, 'mtu'),
      ...options.datastoreNetconf,
      ...pod.as?.netconf,
      ipam: options.ipam?.(node) ?? { type: 'netplug-ipam', ...(pod.pools ? { ipv4_pools: pod.pools } : {}) },
    };
    return spawnSync('ip', ['netns', 'exec', node.netns.name, NETPLUG_CNI], {
      input: JSON.stringify(netconf),
      encoding: 'utf8',
      timeout: 60_000,
      killSignal: 'SIGKILL',
      env: {
        PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
        CNI_COMMAND: command,
        CNI_CONTAINERID: pod.containerId,
        CNI_NETNS: pod.netns.path,
        CNI_IFNAME: 'eth0',
        CNI_PATH,
        ...(pod.as ? { CNI_ARGS: pod.as.args } : {}),
        NETPLUG_AGENT_SOCKET: join(node.varDir, 'run', 'cni.sock'),
      },
    });
  };
  const topology: Topology = {
    underlay,
    router,
    nodes,
    outside: `${SUBNETS[1]}.254`,
    exec,
    addPod(node, pools, as) {
      const pod = {
        netns: netns(`pod${namespaces.length}`),
        containerId: containerId(),
        ...(pools ? { pools } : {}),
        ...(as ? { as } : {}),
      };
      const run = cni(node, 'ADD', pod);
      if (run.status !== 0) throw new Error(`ADD on ${node.name} failed (${run.status}): ${run.stdout} ${run.stderr}`);
      const result = JSON.parse(run.stdout) as { ips: { address: string }[] };
      const addresses = result.ips.map((ip) => ip.address.split('/')[0] ?? '');
      const made: Pod = { node, address: addresses[0] ?? '', addresses, ...pod };
      pods.add(made);
      return made;
    },
    deletePod(pod) {
      const run = cni(pod.node, 'DEL', pod);
      if (run.status !== 0) throw new Error(`DEL on ${pod.node.name} failed (${run.status}): ${run.stdout} ${run.stderr}`);
      pods.delete(pod);
    },
  };
  // Pods deleted through the plugin before their namespaces go: their addresses are released in etcd, their veths removed.
  t.teardown(() => {
    for (const pod of pods) cni(pod.node, 'DEL', pod);
  });
  return topology;
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
  });
}

/** The routes of protocol 80 (netplug's) of one family in a namespace, as `dst via gw dev d [onlink]`. */
export function netplugRoutes(ns: Netns, family: 4 | 6 = 4): string[] {
  const out = execFileSync('ip', ['-n', ns.name, '-j', `-${family}`, 'route', 'show', 'proto', '80'], { encoding: 'utf8' }).trim();
  const json = (out ? JSON.parse(out) : []) as { dst: string; gateway?: string; dev: string; flags?: string[] }[];
  return json
    .map((r) => `${r.dst}${r.gateway ? ` via ${r.gateway}` : ''} dev ${r.dev}${r.flags?.includes('onlink') ? ' onlink' : ''}`)
    .sort();
}
