// What runs on the cluster while an upgrade rolls, and what must hold afterwards (what must work
// during an upgrade): a Deployment of busybox pods, a hostPort pod, two pods pinging each other every
// 0.2 s, and during the rollout a pod created every few seconds. Afterwards: netplug's pods Running
// and ready, the cluster's version the new one, every pod that ran before kept its address, no
// address twice, at most 1 % of the pings lost, every pod created during the rollout networked.
//
// On a cluster of several nodes (scripts/lib/cluster-nodes.ts) the workload is spread over them:
// the Deployment evenly, the pingers on the first node and the last (subnets A and B, behind the
// router), the hostPort pod on the last (reached from the first node's network), the probe pods on
// each node in turn. v3.30.0 routes no pod traffic between nodes: its README lists routing between
// nodes as "next", its pools have no encapsulation, so such a cluster relies on its network to
// route each node's address blocks to the node. The test's router is made to do that for every
// block in use, from the install on (routePodBlocksThroughout: the controllers' pod on another
// node than the API server's needs it too), and once more before the pingers start; this release,
// once it runs, routes the blocks of nodes on its subnet itself (directly via the node's address)
// and leaves those elsewhere to that network (its pool kept without encapsulation), so the pingers'
// path across the subnets stays the router's throughout the rollout, and node 1 reaches node 2's
// pods by its own routes once upgraded.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import type { ExecutionContext } from 'ava';

import { NETPLUG_VERSION } from '../../ts/version.ts';
import { eventually, NETPLUGCTL } from '../e2e/install.ts';
import { runPods } from '../e2e/operator-install.ts';
import { BUSYBOX_IMAGE, type Cluster, getJson } from '../helpers/cluster.ts';
import { nftBinary } from '../helpers/kernel.ts';
import { type PreviousInstall, runNetplugctl } from './install-previous.ts';

const run = promisify(execFile);

export const WORKLOAD = 'workload';
export const WORKLOAD_REPLICAS = 10;
export const HOST_PORT = 18080;
const PINGERS = ['pinger-a', 'pinger-b'] as const;
const PROBE_LABEL = 'netplug-upgrade-probe';
/** How long a probe pod stays after it is Running: it is deleted during the rollout too (DEL), not only created. */
const PROBE_LIFETIME_MS = 15_000;
/**
 * The pause between two probe pods. Every 2 s made some fifty pods in each upgrade's rollout, whose
 * starts (the kubelet, containerd, the CNI, the API server) took the CPU the rollout itself needed.
 */
const PROBE_INTERVAL_MS = 5_000;
/** The block size of v3.30.0's default pool (its manifests' ipv4_pool_block_size): a pod's block is its address's /26. */
const BLOCK_PREFIX_LENGTH = 26;

// Pings the address written to /tmp/peer until told to end a measuring period: `kill -INT` of the
// ping in /tmp/ping.now makes it print its statistics into /tmp/ping-<n>.log, and the next starts.
const PINGER_SCRIPT = `until [ -s /tmp/peer ]; do sleep 0.2; done
n=0
while :; do
  ping -i 0.2 "$(cat /tmp/peer)" > /tmp/ping-$n.log 2>&1 &
  echo "$n $!" > /tmp/ping.now
  wait $!
  n=$((n+1))
done`;

const podSpec = (name: string, command: string[], extra: object = {}, nodeName?: string) =>
  JSON.stringify({
    spec: {
      containers: [{ name, image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command, ...extra }],
      terminationGracePeriodSeconds: 1,
      ...(nodeName ? { nodeName } : {}),
    },
  });

/** Where the pingers and the hostPort pod run: on one node, wherever the scheduler puts them; on several, pinned (see the top). */
function placement(cluster: Cluster): { pingers: (string | undefined)[]; hostPort: string | undefined } {
  if (cluster.nodes.length < 2) return { pingers: [undefined, undefined], hostPort: undefined };
  const [first, last] = [cluster.nodes[0]!.name, cluster.nodes[cluster.nodes.length - 1]!.name];
  return { pingers: [first, last], hostPort: last };
}

const runningWithAddress = (pod: any) => pod.status?.phase === 'Running' && pod.status.podIP && !pod.metadata.deletionTimestamp;

/** Starts the workload and waits until all of it runs, the pingers pinging each other. */
export async function startWorkload(cluster: Cluster): Promise<void> {
  const where = placement(cluster);
  await runPods(cluster, WORKLOAD, BUSYBOX_IMAGE, WORKLOAD_REPLICAS, cluster.nodes.length > 1);
  await cluster.kubectl(
    'run',
    'hostport',
    `--image=${BUSYBOX_IMAGE}`,
    '--overrides',
    podSpec(
      'hostport',
      ['sh', '-c', 'mkdir -p /www && echo netplug-hostport > /www/index.html && exec httpd -f -p 8080 -h /www'],
      { ports: [{ containerPort: 8080, hostPort: HOST_PORT }] },
      where.hostPort,
    ),
  );
  for (const [i, name] of PINGERS.entries())
    await cluster.kubectl(
      'run',
      name,
      `--image=${BUSYBOX_IMAGE}`,
      '--overrides',
      podSpec(name, ['sh', '-c', PINGER_SCRIPT], {}, where.pingers[i]),
    );
  await cluster.kubectl('wait', '--for=condition=Ready', 'pod/hostport', ...PINGERS.map((name) => `pod/${name}`), '--timeout=180s');
  if (cluster.router) await routePodBlocks(cluster, cluster.router);
  const [a, b] = await Promise.all(PINGERS.map(async (name) => (await getJson(cluster, 'pod', name)).status.podIP as string));
  await cluster.kubectl('exec', PINGERS[0], '--', 'sh', '-c', `echo ${b} > /tmp/peer.new && mv /tmp/peer.new /tmp/peer`);
  await cluster.kubectl('exec', PINGERS[1], '--', 'sh', '-c', `echo ${a} > /tmp/peer.new && mv /tmp/peer.new /tmp/peer`);
  await answersOnHostPort(cluster);
}

/** The hostPort pod's answer on its node's address, asked from the first node. */
export async function answersOnHostPort(cluster: Cluster): Promise<string> {
  const host = (await getJson(cluster, 'pod', 'hostport')).status.hostIP as string;
  return eventually(
    'an answer on the hostPort',
    async () => (await cluster.inNode('curl', ['-sS', '--max-time', '5', `http://${host}:${HOST_PORT}/`])).trim() || undefined,
    60,
  );
}

/**
 * The router between the subnets routes the block of each running pod's address to the pod's
 * node, as the network of a v3.30.0 cluster of several nodes must (see the top); removed with the
 * router's namespace. `routed`: the routes made so far, which are not made again.
 */
export async function routePodBlocks(cluster: Cluster, router: string, routed = new Map<string, string>()): Promise<void> {
  const addresses = new Map(cluster.nodes.map((node) => [node.name, node.address]));
  const pods = (await getJson(cluster, 'pods', '-A')).items as any[];
  const blocks = new Map<string, string>();
  for (const pod of pods.filter((each) => !each.spec.hostNetwork && runningWithAddress(each))) {
    const octets = (pod.status.podIP as string).split('.').map(Number);
    const value = ((octets[0]! << 24) | (octets[1]! << 16) | (octets[2]! << 8) | octets[3]!) >>> 0;
    const base = (value & ~((1 << (32 - BLOCK_PREFIX_LENGTH)) - 1)) >>> 0;
    const block = `${[24, 16, 8, 0].map((shift) => (base >>> shift) & 255).join('.')}/${BLOCK_PREFIX_LENGTH}`;
    const node = addresses.get(pod.spec.nodeName);
    if (!node)
      throw new Error(`pod ${pod.metadata.namespace}/${pod.metadata.name} runs on ${pod.spec.nodeName}, not a node of the cluster`);
    const known = blocks.get(block);
    if (known && known !== node) throw new Error(`block ${block} holds pods of two nodes (${known}, ${node})`);
    blocks.set(block, node);
  }
  for (const [block, node] of blocks)
    if (routed.get(block) !== node) {
      await run('ip', ['-n', router, 'route', 'replace', block, 'via', node]);
      routed.set(block, node);
    }
}

/**
 * routePodBlocks every 2 s until stop(): the network's own routing, which learns a block once a
 * pod has an address in it (a pass that fails, a pod going away meanwhile, is made again at the next).
 */
export function routePodBlocksThroughout(cluster: Cluster, router: string): { stop: () => Promise<void> } {
  let stopping = false;
  const routed = new Map<string, string>();
  const loop = (async () => {
    while (!stopping) {
      await routePodBlocks(cluster, router, routed).catch(() => undefined);
      if (!stopping) await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  })();
  return {
    async stop() {
      stopping = true;
      await loop;
    },
  };
}

export interface PodAddress {
  namespace: string;
  name: string;
  ip: string;
}

/** The addresses of the pods that run now (not host-network), by pod UID. */
export async function snapshotAddresses(cluster: Cluster): Promise<Map<string, PodAddress>> {
  const pods = (await getJson(cluster, 'pods', '-A')).items as any[];
  return new Map(
    pods
      .filter((pod) => !pod.spec.hostNetwork && runningWithAddress(pod))
      .map((pod) => [pod.metadata.uid, { namespace: pod.metadata.namespace, name: pod.metadata.name, ip: pod.status.podIP }]),
  );
}

/** Ends the pinger's current measuring period; its ping statistics. */
async function endPingPeriod(cluster: Cluster, pinger: string): Promise<{ sent: number; received: number }> {
  const period = (
    await cluster.kubectl('exec', pinger, '--', 'sh', '-c', 'read n pid < /tmp/ping.now && kill -INT $pid && echo $n')
  ).trim();
  const summary = await eventually(
    `${pinger}'s ping statistics`,
    async () =>
      /(\d+) packets transmitted, (\d+) packets received/.exec(
        await cluster.kubectl('exec', pinger, '--', 'cat', `/tmp/ping-${period}.log`),
      ) ?? undefined,
    30,
  );
  return { sent: Number(summary[1]), received: Number(summary[2]) };
}

export interface RolloutStats {
  pingSent: number;
  pingReceived: number;
  lossPercent: number;
  /** `pinger-a on <node>`, each pinger's. */
  pingers: string[];
  podsCreated: number;
  podsNetworked: number;
  /** FailedCreatePodSandBox events of the probe pods (the kubelet retries; the pod may still get networked). */
  failedSandboxes: number;
  /** Each probe pod's address and when it held it, for the duplicate check. */
  probeAddresses: { name: string; ip: string; from: number; to: number }[];
  /** The nodes the probe pods that got networked ran on, each once. */
  probeNodes: string[];
}

export interface RolloutProbes {
  stop(): Promise<RolloutStats>;
}

/**
 * Starts measuring: a new ping period on both pingers (the one before must have had answers), and
 * a loop creating a probe pod every few seconds (on several nodes, on each in turn), each waited
 * for until Running with an address, kept a while, then deleted.
 */
export async function startRolloutProbes(cluster: Cluster): Promise<RolloutProbes> {
  for (const pinger of PINGERS) {
    const before = await endPingPeriod(cluster, pinger);
    if (before.received === 0) throw new Error(`${pinger} had no answer before the rollout (${before.sent} sent)`);
  }
  let stopping = false;
  let created = 0;
  const outcomes: Promise<{ networked: boolean; name: string; ip?: string; node?: string; from: number; to: number }>[] = [];
  const probe = async (name: string) => {
    // One watch (kubectl wait) rather than a poll: a probe is waited for while others start.
    const pod = await cluster
      .kubectl('wait', '--for=condition=Ready', '--timeout=180s', `pod/${name}`)
      .then(() => getJson(cluster, 'pod', name))
      .then((found) => (runningWithAddress(found) ? found : undefined))
      .catch(() => undefined);
    const from = Date.now();
    if (pod) await new Promise((resolve) => setTimeout(resolve, PROBE_LIFETIME_MS));
    const to = Date.now();
    await cluster.kubectl('delete', 'pod', name, '--wait=false', '--ignore-not-found');
    return {
      networked: pod !== undefined,
      name,
      ...(pod ? { ip: pod.status.podIP as string, node: pod.spec.nodeName as string } : {}),
      from,
      to,
    };
  };
  const loop = (async () => {
    while (!stopping) {
      const name = `probe-${created}`;
      await cluster.kubectl(
        'run',
        name,
        `--image=${BUSYBOX_IMAGE}`,
        `--labels=${PROBE_LABEL}=true`,
        '--restart=Never',
        '--overrides',
        podSpec(name, ['sleep', '600'], {}, cluster.nodes.length > 1 ? cluster.nodes[created % cluster.nodes.length]!.name : undefined),
      );
      created++;
      outcomes.push(probe(name));
      await new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS));
    }
  })();
  return {
    async stop() {
      stopping = true;
      await loop;
      const probes = await Promise.all(outcomes);
      const ping = await Promise.all(PINGERS.map((pinger) => endPingPeriod(cluster, pinger)));
      const pingers = await Promise.all(
        PINGERS.map(async (pinger) => `${pinger} on ${(await getJson(cluster, 'pod', pinger)).spec.nodeName}`),
      );
      const events = (await getJson(cluster, 'events', '--field-selector', 'reason=FailedCreatePodSandBox')).items as any[];
      await eventually('the probe pods deleted', async () => (await getJson(cluster, 'pods', '-l', PROBE_LABEL)).items.length === 0, 180);
      const pingSent = ping.reduce((sum, p) => sum + p.sent, 0);
      const pingReceived = ping.reduce((sum, p) => sum + p.received, 0);
      return {
        pingSent,
        pingReceived,
        pingers,
        lossPercent: pingSent === 0 ? 100 : (100 * (pingSent - pingReceived)) / pingSent,
        podsCreated: created,
        podsNetworked: probes.filter((p) => p.networked).length,
        failedSandboxes: events.filter((event) => event.involvedObject?.name?.startsWith('probe-')).length,
        probeAddresses: probes.flatMap((p) => (p.ip ? [{ name: p.name, ip: p.ip, from: p.from, to: p.to }] : [])),
        probeNodes: [...new Set(probes.flatMap((p) => (p.node ? [p.node] : [])))].sort(),
      };
    },
  };
}

/** One line for t.log: the rollout's figures. */
export const describeRollout = (seconds: number, stats: RolloutStats) =>
  `rollout ${seconds.toFixed(1)} s; ping (${stats.pingers.join(', ')}) sent ${stats.pingSent}, received ${stats.pingReceived}, ` +
  `loss ${stats.lossPercent.toFixed(2)} %; ` +
  `pods created during the rollout ${stats.podsCreated}, networked ${stats.podsNetworked} (on ${stats.probeNodes.join(', ')}); ` +
  `FailedCreatePodSandBox events ${stats.failedSandboxes}`;

const NETPLUG_NAMESPACES = new Set(['kube-system', 'netplug-system', 'netplug-operator']);
const allReady = (pod: any, containers: number) =>
  pod.status?.phase === 'Running' &&
  pod.status.containerStatuses?.length === containers &&
  pod.status.containerStatuses.every((status: any) => status.ready);

/** The issue's list of what holds after an upgrade to this release. */
export async function checkAfterUpgrade(
  t: ExecutionContext,
  cluster: Cluster,
  installed: PreviousInstall,
  before: Map<string, PodAddress>,
  stats: RolloutStats,
  /** This release's netplugctl (dist/bin/netplugctl, or a copy of it). */
  netplugctl = NETPLUGCTL,
): Promise<void> {
  const netplugOf = (pods: any[]) =>
    pods.filter((pod) => ['netplug-node', 'netplug-kube-controllers', 'netplug-operator'].includes(pod.metadata.labels?.['k8s-app']));
  // The replaced pods of a finished rollout may still be terminating for a moment.
  const pods = await eventually('no netplug pod terminating', async () => {
    const items = (await getJson(cluster, 'pods', '-A')).items as any[];
    return netplugOf(items).some((pod) => pod.metadata.deletionTimestamp) ? undefined : items;
  });
  const netplugPods = netplugOf(pods);
  const nodePods = netplugPods.filter((pod) => pod.metadata.labels?.['k8s-app'] === 'netplug-node');
  const controllers = netplugPods.filter((pod) => pod.metadata.labels?.['k8s-app'] === 'netplug-kube-controllers');
  t.true(
    netplugPods.every((pod) => pod.status.phase === 'Running' && !pod.metadata.deletionTimestamp),
    `netplug's pods Running: ${netplugPods.map((pod) => `${pod.metadata.name} ${pod.status.phase}`).join(', ')}`,
  );
  t.deepEqual(nodePods.map((pod) => pod.spec.nodeName).sort(), cluster.nodes.map((node) => node.name).sort(), 'one node pod on each node');
  t.true(
    nodePods.every((pod) => allReady(pod, 2)),
    'the node pods ready 2/2',
  );
  t.is(controllers.length, 1, 'one controllers pod');
  t.true(
    controllers.every((pod) => allReady(pod, 1)),
    'the controllers pod ready 1/1',
  );
  for (const pod of [...nodePods, ...controllers])
    for (const container of pod.spec.containers)
      t.is(container.image, `localhost/netplug:${NETPLUG_VERSION}`, `${pod.metadata.name}/${container.name} runs this release`);

  const version = await runNetplugctl(cluster, installed, netplugctl, 'version');
  t.regex(version, new RegExp(`Cluster Version:\\s+${NETPLUG_VERSION.replaceAll('.', '\\.')}\\n`));

  const now = new Map(pods.filter((pod) => !pod.spec.hostNetwork && runningWithAddress(pod)).map((pod) => [pod.metadata.uid, pod]));
  for (const [uid, was] of before) {
    const pod = now.get(uid);
    // netplug's own pods are replaced by the rollout; every other pod must still run with its address.
    if (!pod && NETPLUG_NAMESPACES.has(was.namespace)) continue;
    t.is(pod?.status.podIP, was.ip, `${was.namespace}/${was.name} kept ${was.ip}`);
  }
  // ... and answers there.
  await pingFromNode(
    cluster,
    [...before.values()].filter((pod) => !NETPLUG_NAMESPACES.has(pod.namespace)).map((pod) => pod.ip),
  );
  const addresses = [...now.values()].map((pod) => pod.status.podIP as string);
  const duplicates = addresses.filter((ip, i) => addresses.indexOf(ip) !== i);
  t.deepEqual(duplicates, [], 'no address held by two running pods');
  // A probe pod ran beside every pod above and beside the probes of its time: none may have shared an address with them.
  // Not netplug's own pods (the controllers' one): the rollout replaces them, and a probe may then be
  // given an address one of them released, which is no duplicate.
  const kept = new Set([...before.values()].filter((pod) => !NETPLUG_NAMESPACES.has(pod.namespace)).map((pod) => pod.ip));
  t.deepEqual(
    stats.probeAddresses.filter((probe) => kept.has(probe.ip)).map((probe) => `${probe.name} ${probe.ip}`),
    [],
    'no pod created during the rollout got an address a running pod held',
  );
  const overlapping = stats.probeAddresses.filter((a, i) =>
    stats.probeAddresses.some((b, j) => j < i && a.ip === b.ip && a.from < b.to && b.from < a.to),
  );
  t.deepEqual(overlapping, [], 'no two probe pods held one address at once');

  t.true(stats.pingReceived > 0, 'the pingers got answers during the rollout');
  t.true(stats.lossPercent <= 1, `ping loss ${stats.lossPercent.toFixed(2)} % during the rollout is at most 1 %`);
  t.true(stats.podsCreated > 0, 'pods were created during the rollout');
  if (cluster.nodes.length > 1)
    t.deepEqual(stats.probeNodes, cluster.nodes.map((node) => node.name).sort(), 'pods created during the rollout ran on every node');
  t.is(stats.podsNetworked, stats.podsCreated, 'every pod created during the rollout got Running with an address');
  t.is(await answersOnHostPort(cluster), 'netplug-hostport');
}

/** netplugctl of the previous release against the upgraded cluster: its outcome and message. */
export async function previousNetplugctl(
  cluster: Cluster,
  installed: PreviousInstall,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const stdout = await runNetplugctl(cluster, installed, installed.release.netplugctl, ...args);
    return { code: 0, stdout, stderr: '' };
  } catch (err) {
    const failed = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

/** Pings each address from the node once (every pod that kept its address answers). */
export async function pingFromNode(cluster: Cluster, addresses: Iterable<string>): Promise<void> {
  for (const address of addresses) await cluster.inNode('ping', ['-c', '1', '-W', '5', address]);
}

/**
 * After a rollback to a release without network policy: no fail-closed rule of netplug's policy is
 * left in the node's kernel, and a pod created now (networked by that release) gets packets both
 * ways: from the node, to a pinger, and back. A policy part left behind would drop them all.
 */
export async function checkNewPodGetsTraffic(t: ExecutionContext, cluster: Cluster): Promise<void> {
  const table = await cluster.inNode(nftBinary(), ['list', 'table', 'inet', 'netplug']).catch(() => '');
  t.notRegex(table, /fail closed/, "no fail-closed rule of netplug's policy in the node's table");
  const name = 'after-rollback';
  await cluster.kubectl('run', name, `--image=${BUSYBOX_IMAGE}`, '--restart=Never', '--overrides', podSpec(name, ['sleep', '600']));
  try {
    await cluster.kubectl('wait', '--for=condition=Ready', `pod/${name}`, '--timeout=180s');
    const address = (await getJson(cluster, 'pod', name)).status.podIP as string;
    const pinger = (await getJson(cluster, 'pod', PINGERS[0])).status.podIP as string;
    t.regex(await cluster.inNode('ping', ['-c', '1', '-W', '5', address]), / 0% packet loss/, `the node reaches ${name}`);
    t.regex(
      await cluster.kubectl('exec', name, '--', 'ping', '-c', '1', '-W', '5', pinger),
      / 0% packet loss/,
      `${name} reaches ${PINGERS[0]}`,
    );
  } finally {
    await cluster.kubectl('delete', 'pod', name, '--wait=true', '--ignore-not-found');
  }
}
