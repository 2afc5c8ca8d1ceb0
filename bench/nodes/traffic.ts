// Part 1 of bench/nodes.ts: TCP throughput (Debian's iperf3) and round trips (Debian's ping) from
// node 1 to node 2 of a three-node cluster with netplug, which share subnet A, pod to pod against
// node to node on the same links (each node's eth0 on the router's bridge for subnet A). Per mode:
// the default pool switched with `netplugctl pool update --vxlan-mode` (Never: no encapsulation,
// the pool's blocks routed via the other node's address; Always: through vxlan.netplug), every
// node's MTU file waited for (1500, 1450), then a pod made on each of the two nodes, which takes
// it; the route from node 1 to the server pod checked to be the mode's. Pods are busybox, which
// has no iperf3: the host's iperf3 and ping run inside a pod's network namespace
// (nsenter --net=/proc/<its container's pid>/ns/net; the pid from the node's containerd), and
// inside a node's for node to node. Rounds alternate pod to pod and node to node (pod first in
// even rounds, node first in odd ones), after a warm-up of each.
import { join } from 'node:path';

import type { Cluster, ClusterNode } from '../../scripts/lib/cluster.ts';
import { apply, BUSYBOX_IMAGE, getJson } from '../../test/helpers/cluster.ts';
import { eventually, nodePaths } from '../../test/e2e/install.ts';
import { runToExit } from '../lib/run-to-exit.ts';
import { background, netplugctl } from './clusters.ts';
import { IPERF_SECONDS, log, PINGS, TRAFFIC_ROUNDS } from './settings.ts';

export const MODES = ['direct', 'vxlan'] as const;
export type Mode = (typeof MODES)[number];
export const PATHS = ['pod', 'node'] as const;
export type Path = (typeof PATHS)[number];

const POOL = 'default-ipv4-ippool';
const VXLAN_DEVICE = 'vxlan.netplug';
const SETTINGS: Record<Mode, { vxlanMode: string; mtu: number }> = {
  direct: { vxlanMode: 'Never', mtu: 1500 },
  vxlan: { vxlanMode: 'Always', mtu: 1450 },
};
const PORTS: Record<Path, number> = { pod: 5201, node: 5202 };

export interface Round {
  mode: Mode;
  path: Path;
  round: number;
  /** What the server received, bits per second. */
  bitsPerSecond: number;
  retransmits: number;
  /** Each echo reply's round trip. */
  rttMs: number[];
  lost: number;
}

export interface ModeFacts {
  mode: Mode;
  vxlanMode: string;
  /** The MTU file on nodes 1 and 2, and the pods' eth0. */
  mtu: { nodes: number[]; pods: number[] };
  /** node 1's route to the server pod (`ip route get`). */
  route: string;
}

/** A place traffic starts or ends: a network namespace's path and the address there. */
interface End {
  netns: string;
  address: string;
}

/** `command` inside network namespace `netns` (the host's mount namespace: Debian's tools), to its exit; its stdout. */
function runIn(netns: string, command: string[], timeoutMs: number): Promise<string> {
  return runToExit(['nsenter', `--net=${netns}`, '--', ...command], `${command.join(' ')} in ${netns}`, timeoutMs);
}

/** iperf3 from `from` to the server at `to`, `seconds` after one omitted. */
async function iperf(from: End, to: End, port: number, seconds: number): Promise<{ bitsPerSecond: number; retransmits: number }> {
  const out = await runIn(
    from.netns,
    ['iperf3', '--client', to.address, '--port', String(port), '--time', String(seconds), '--omit', '1', '--json'],
    seconds * 1000 + 30_000,
  );
  const result = JSON.parse(out) as { end?: { sum_received?: { bits_per_second?: number }; sum_sent?: { retransmits?: number } } };
  const bitsPerSecond = result.end?.sum_received?.bits_per_second;
  if (bitsPerSecond === undefined) throw new Error(`iperf3 gave no result: ${out.slice(0, 2000)}`);
  return { bitsPerSecond, retransmits: result.end?.sum_sent?.retransmits ?? 0 };
}

/** `count` echo requests 20 ms apart; each reply's round trip in ms, and how many went unanswered. */
async function ping(from: End, to: End, count: number): Promise<{ rttMs: number[]; lost: number }> {
  const out = await runIn(
    from.netns,
    ['ping', '-n', '-c', String(count), '-i', '0.02', '-W', '1', to.address],
    count * 1000 + 10_000,
  ).catch((err: Error) => err.message);
  const rttMs = [...out.matchAll(/ time=([\d.]+) ms/g)].map((m) => Number(m[1]));
  return { rttMs, lost: count - rttMs.length };
}

/** An iperf3 server in `at`, listening when this resolves. */
async function serve(at: End, port: number): Promise<() => void> {
  const child = background(['nsenter', `--net=${at.netns}`, '--', 'iperf3', '--server', '--port', String(port)]);
  await eventually(
    `iperf3 listening on ${at.address}:${port}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`iperf3 exited ${child.exitCode}`);
      return (await runIn(at.netns, ['ss', '-Hltn', `sport = :${port}`], 10_000)).trim() !== '' || undefined;
    },
    30,
  );
  return () => child.kill('SIGKILL');
}

const mtuOf = (text: string) => Number(/\bmtu (\d+)/.exec(text)?.[1]);

/** The pod's network namespace, by its container's pid in the node's containerd. */
async function podNetns(c: Cluster, node: ClusterNode, pod: string): Promise<string> {
  const id = String((await getJson(c, 'pod', pod)).status.containerStatuses?.[0]?.containerID ?? '').replace(/^containerd:\/\//, '');
  if (!id) throw new Error(`${pod} has no container`);
  const tasks = await node.inNode('ctr', ['--address', join(c.dir, 'containerd/containerd.sock'), '--namespace', 'k8s.io', 'task', 'ls']);
  const pid = new RegExp(`^${id}\\s+(\\d+)\\s`, 'm').exec(tasks)?.[1];
  if (!pid) throw new Error(`no task ${id} (${pod}) on ${node.name}: ${tasks}`);
  return `/proc/${pid}/ns/net`;
}

/** Switches the pool to `mode`, waits for the nodes' MTU files, makes the two pods and checks their MTU and node 1's route. */
async function prepare(c: Cluster, mode: Mode): Promise<{ facts: ModeFacts; client: End; server: End }> {
  const { vxlanMode, mtu } = SETTINGS[mode];
  const [first, second] = c.nodes as [ClusterNode, ClusterNode];
  await netplugctl(c, 'pool', 'update', POOL, '--vxlan-mode', vxlanMode);
  const mtuFile = join(nodePaths(c).varLib, 'mtu');
  const nodeMtus = await eventually(
    `MTU ${mtu} in both nodes' MTU files`,
    async () => {
      const found = await Promise.all([first, second].map(async (node) => Number((await node.inNode('cat', [mtuFile])).trim())));
      return found.every((each) => each === mtu) ? found : undefined;
    },
    120,
  );
  const names = [`${mode}-client`, `${mode}-server`];
  await apply(
    c,
    ...[first, second].map((node, index) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: names[index], labels: { app: 'bench-traffic', mode } },
      spec: {
        nodeName: node.name,
        terminationGracePeriodSeconds: 1,
        containers: [{ name: 'sleep', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
      },
    })),
  );
  await c.kubectl('wait', '--for=condition=Ready', 'pod', '-l', `mode=${mode}`, '--timeout=180s');
  const [client, server] = await Promise.all(
    [first, second].map(async (node, index) => {
      const name = names[index] as string;
      return { netns: await podNetns(c, node, name), address: (await getJson(c, 'pod', name)).status.podIP as string };
    }),
  );
  const podMtus = await Promise.all(
    [client, server].map(async (end) => mtuOf(await runIn(end!.netns, ['ip', '-o', 'link', 'show', 'dev', 'eth0'], 10_000))),
  );
  if (podMtus.some((each) => each !== mtu)) throw new Error(`${mode}: the pods' MTU is ${podMtus.join(', ')}, not ${mtu}`);
  // node 1's route to the server pod: via node 2's address on eth0, or through the VXLAN device.
  const route = await eventually(
    `node 1's ${mode} route to ${server!.address}`,
    async () => {
      // -o ends the line with `\ cache`.
      const text = (await first.inNode('ip', ['-o', 'route', 'get', server!.address])).split('\\')[0]!.trim();
      const ok = mode === 'direct' ? text.includes(`via ${second.address} dev eth0`) : text.includes(`dev ${VXLAN_DEVICE}`);
      return ok ? text : undefined;
    },
    60,
  );
  log(`${mode}: pool ${vxlanMode}, MTU ${mtu}, pods ${client!.address} → ${server!.address}; node 1: ${route}`);
  return { facts: { mode, vxlanMode, mtu: { nodes: nodeMtus, pods: podMtus }, route }, client: client!, server: server! };
}

/** Every round of both modes on `c` (a cluster with netplug): each mode's facts and rounds. */
export async function trafficRounds(c: Cluster): Promise<{ facts: ModeFacts[]; rounds: Round[] }> {
  const [first, second] = c.nodes as [ClusterNode, ClusterNode];
  const nodeClient: End = { netns: first.netnsPath, address: first.address };
  const nodeServer: End = { netns: second.netnsPath, address: second.address };
  const stopNodeServer = await serve(nodeServer, PORTS.node);
  const facts: ModeFacts[] = [];
  const rounds: Round[] = [];
  try {
    for (const mode of MODES) {
      const prepared = await prepare(c, mode);
      facts.push(prepared.facts);
      const stopPodServer = await serve(prepared.server, PORTS.pod);
      const ends: Record<Path, { from: End; to: End }> = {
        pod: { from: prepared.client, to: prepared.server },
        node: { from: nodeClient, to: nodeServer },
      };
      for (const path of PATHS) {
        await iperf(ends[path].from, ends[path].to, PORTS[path], 2);
        await ping(ends[path].from, ends[path].to, 10);
      }
      for (let round = 0; round < TRAFFIC_ROUNDS; round++) {
        for (const path of round % 2 === 0 ? PATHS : [...PATHS].reverse()) {
          const { from, to } = ends[path];
          const measured = await iperf(from, to, PORTS[path], IPERF_SECONDS);
          const echoed = await ping(from, to, PINGS);
          rounds.push({ mode, path, round, ...measured, ...echoed });
          const rtt = [...echoed.rttMs].sort((a, b) => a - b)[Math.floor(echoed.rttMs.length / 2)] ?? Number.NaN;
          log(
            `${mode} round ${round + 1}/${TRAFFIC_ROUNDS}, ${path} to ${path}: ${(measured.bitsPerSecond / 1e9).toFixed(2)} Gbit/s (${measured.retransmits} retransmits), round trip ${rtt.toFixed(3)} ms${echoed.lost ? `, ${echoed.lost} lost` : ''}`,
          );
        }
      }
      stopPodServer();
      await c.kubectl('delete', 'pods', '-l', `mode=${mode}`, '--grace-period=1', '--wait=true', '--timeout=60s');
    }
  } finally {
    stopNodeServer();
  }
  return { facts, rounds };
}
