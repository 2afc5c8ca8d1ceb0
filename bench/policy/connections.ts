// Parts 2 and 3 of bench/policy.ts, timed on a real connection: a target pod on the enforcing node
// takes ingress only from role=db pods (the set every policy uses) and a client pod connects to it
// every millisecond (bench/policy-probe.ts in the client's namespace); a figure runs from the API
// write to the start of the first attempt that connects. Part 2 creates a policy allowing the
// client; part 3 gives a role=db pod the client's address.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

import * as k8s from '@kubernetes/client-node';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import { Probe } from './agent.ts';
import type { Cluster } from './cluster.ts';
import { namespaceName } from './objects.ts';
import { collector, ms } from './session.ts';
import { CLIENT_ADDRESS, CREATIONS, NAMESPACES, ON, PORT, SET_UPDATES, TARGET } from './settings.ts';

/**
 * The target pod on the agent's node, ingress only from role=db pods (the set every policy uses);
 * the client plugged into the same node under a name outside the workload prefix, so that only the
 * target's chains judge its connections. The client's prober.
 */
export async function plugTargetAndClient({ core, networking, onNode }: Cluster): Promise<Probe> {
  await core.createNamespace({ body: { metadata: { name: TARGET.namespace } } });
  await networking.createNamespacedNetworkPolicy({
    namespace: TARGET.namespace,
    body: {
      metadata: { name: 'from-db-only' },
      spec: {
        podSelector: { matchLabels: { app: 'probe' } },
        policyTypes: ['Ingress'],
        ingress: [{ _from: [{ namespaceSelector: {}, podSelector: { matchLabels: { role: 'db' } } }] }],
      },
    },
  });
  const target = await core.createNamespacedPod({
    namespace: TARGET.namespace,
    body: {
      metadata: { name: TARGET.name, labels: { app: 'probe' } },
      spec: { nodeName: ON, containers: [{ name: 'main', image: 'busybox' }] },
    },
  });
  target.status = { ...target.status, phase: 'Running', podIP: TARGET.address, podIPs: [{ ip: TARGET.address }] };
  await core.replaceNamespacedPodStatus({ namespace: TARGET.namespace, name: TARGET.name, body: target });
  const plug = (label: string, address: string, hostSide: string): string => {
    const netns = `nppb-${label}-${process.pid}`;
    execFileSync('ip', ['netns', 'add', netns]);
    collector.teardown(() => spawnSync('ip', ['netns', 'del', netns]));
    execFileSync('ip', ['link', 'add', 'eth0', 'netns', netns, 'type', 'veth', 'peer', 'name', hostSide, 'netns', onNode.netns.name]);
    const sh = (ns: string, script: string) => execFileSync('ip', ['netns', 'exec', ns, 'sh', '-ec', script]);
    sh(
      netns,
      `ip link set lo up; ip addr add ${address}/32 dev eth0; ip link set eth0 up
       ip route add 169.254.1.1 dev eth0 scope link; ip route add default via 169.254.1.1 dev eth0`,
    );
    sh(
      onNode.netns.name,
      `ip link set ${hostSide} up; sysctl -qw net.ipv4.conf.${hostSide}.proxy_arp=1 net.ipv4.neigh.${hostSide}.proxy_delay=0
       ip route add ${address}/32 dev ${hostSide}`,
    );
    return netns;
  };
  const targetNetns = plug('target', TARGET.address, hostInterfaceName('cali', `${TARGET.namespace}.${TARGET.name}`));
  const clientNetns = plug('client', CLIENT_ADDRESS, `npbc${process.pid % 100_000}`);
  const listener = spawn(
    'ip',
    [
      'netns',
      'exec',
      targetNetns,
      process.execPath,
      '-e',
      `require('node:net').createServer((s) => s.destroy()).listen(${PORT}, '0.0.0.0')`,
    ],
    { stdio: 'ignore' },
  );
  collector.teardown(() => listener.kill('SIGKILL'));
  return new Probe(clientNetns);
}

/** Times `write` until a connection from the client to the target connects (it must not before). */
async function untilOpen(client: Probe, write: () => Promise<unknown>): Promise<number> {
  return (await timedUntilOpen(client, write)).ms;
}

/** As untilOpen, with the instants (hrtime) of the write's request and of the attempt that connected. */
async function timedUntilOpen(client: Probe, write: () => Promise<unknown>): Promise<{ ms: number; started: bigint; opened: bigint }> {
  const open = client.request({ op: 'open', host: TARGET.address, port: PORT, timeoutMs: 30_000 });
  // The prober's first attempts go out (and fail) before the write.
  await sleep(30);
  const started = process.hrtime.bigint();
  await write();
  const reply = await open;
  if (reply.timeout || reply.startNs === undefined) throw new Error('the connection did not open within 30 s of the write');
  const opened = BigInt(reply.startNs);
  return { ms: Math.max(0, ms(started, opened)), started, opened };
}

/** Part 2: CREATIONS times a policy allowing the client created, until it connects; then deleted. */
export async function policyCreations({ networking }: Cluster, client: Probe): Promise<number[]> {
  const creations: number[] = [];
  for (let i = 0; i < CREATIONS; i++) {
    const name = `allow-client-${i}`;
    creations.push(
      await untilOpen(client, () =>
        networking.createNamespacedNetworkPolicy({
          namespace: TARGET.namespace,
          body: {
            metadata: { name },
            spec: { podSelector: { matchLabels: { app: 'probe' } }, ingress: [{ _from: [{ ipBlock: { cidr: `${CLIENT_ADDRESS}/32` } }] }] },
          },
        }),
      ),
    );
    await networking.deleteNamespacedNetworkPolicy({ namespace: TARGET.namespace, name });
    await client.closed(TARGET.address);
  }
  return creations;
}

/** The node part 3's pods are on: another node, so only set elements change on the agent's. */
const REMOTE_NODE = 'bench-node-7';

/** Part 3's samples: each whole, and split at the moment the bench's own watch saw the write. */
export interface SetUpdates {
  /** From the status write until the connection opened. */
  samples: number[];
  /** From the status write until the bench's own watch of the pod got it (the API server's part, its peer). */
  apiServer: number[];
  /** From the bench's watch getting it until the connection opened (the agent's part, with its own watch's delivery). */
  agentSide: number[];
  /** The agent's policy passes (netplug_policy_flush_duration_seconds) between the write and the connection, summed. */
  passes: number[];
}

/**
 * A watch of the Pod objects on `node` from now on, as the agent's informer watches every pod
 * (the API server's watch cache fans one change out to both): when each was first seen with `address`.
 */
async function watchAddressed(config: k8s.KubeConfig, core: k8s.CoreV1Api, node: string, address: string) {
  const seen = new Map<string, bigint>();
  const from = (await core.listPodForAllNamespaces({ limit: 1 })).metadata?.resourceVersion;
  const watching = await new k8s.Watch(config).watch(
    '/api/v1/pods',
    { fieldSelector: `spec.nodeName=${node}`, resourceVersion: from, allowWatchBookmarks: false },
    (_phase: string, pod: k8s.V1Pod) => {
      const at = process.hrtime.bigint();
      const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
      if (pod.status?.podIP === address && !seen.has(key)) seen.set(key, at);
    },
    () => undefined,
  );
  return { seen, stop: () => watching.abort() };
}

/** Part 3: SET_UPDATES times a role=db pod given the client's address, until it connects; then deleted. */
export async function setUpdates({ config, core, agents }: Cluster, client: Probe): Promise<SetUpdates> {
  const result: SetUpdates = { samples: [], apiServer: [], agentSide: [], passes: [] };
  const watch = await watchAddressed(config, core, REMOTE_NODE, CLIENT_ADDRESS);
  try {
    for (let i = 0; i < SET_UPDATES; i++) {
      const namespace = namespaceName(i % NAMESPACES);
      const name = `db-client-${i}`;
      const pod = await core.createNamespacedPod({
        namespace,
        body: {
          metadata: { name, labels: { role: 'db', app: 'client' } },
          spec: { nodeName: REMOTE_NODE, containers: [{ name: 'main', image: 'busybox' }] },
        },
      });
      // The pod without an address is seen and passed over first (no element to add yet).
      await sleep(200);
      pod.status = { ...pod.status, phase: 'Running', podIP: CLIENT_ADDRESS, podIPs: [{ ip: CLIENT_ADDRESS }] };
      const before = await agents.on.flushes();
      const {
        ms: sample,
        started,
        opened,
      } = await timedUntilOpen(client, () => core.replaceNamespacedPodStatus({ namespace, name, body: pod }));
      const after = await agents.on.flushes();
      const seenAt = watch.seen.get(`${namespace}/${name}`);
      if (seenAt === undefined) throw new Error(`the bench's watch did not see ${namespace}/${name} given its address`);
      result.samples.push(sample);
      result.apiServer.push(ms(started, seenAt));
      result.agentSide.push(Math.max(0, ms(seenAt, opened)));
      result.passes.push(1000 * (after.seconds - before.seconds));
      await core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
      await client.closed(TARGET.address);
    }
  } finally {
    watch.stop();
  }
  return result;
}
