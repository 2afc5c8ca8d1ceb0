// npm run bench:policy, second part (the first is bench/policy-compiler.ts, the compiler in-process):
// netplug-node with NETPLUG_POLICY_ENFORCEMENT=true on a real kube-apiserver (the Kubernetes
// datastore), each "node" a network namespace reaching the API server through a relay
// (test/helpers/nodes.ts), its pods network namespaces plugged into it and Pod objects, as
// test/node/policy-enforcement.test.ts does it. Four figures, each against what the owner asked:
//   1. ADD through the agent (the shim → netplug-node, spawned natively as bench/agent.ts does) in
//      a namespace with a default-deny policy and 50 other policies, against the same ADD through
//      a second agent with enforcement off, the two rotated pod by pod in one run;
//   2. a NetworkPolicy created until its effect is seen on a real connection, with 1,000 policies and
//      10,000 Pod objects in the datastore (~110 on the agent's node): a client pod connects to a
//      target pod every millisecond (bench/policy-probe.ts, inside the client's namespace) and the
//      time runs from the create request to the start of the first attempt that connects;
//   3. one pod added to a set that every policy uses (role=db in any namespace): from its Pod
//      object's status write (its address) until a connection from that address, blocked before,
//      connects;
//   4. a full resync at 5,000 policies: the agent restarted onto an empty table; its first policy
//      pass (every input fed, the whole part written: the agent's own
//      netplug_policy_flush_duration_seconds), the wall time to ready, and its VmRSS.
// Everything (API server, etcd, agents, namespaces, veths, the table with its namespace) goes at
// the end, on failure and on Ctrl-C too. Writes bench/results/policy.{md,json,svg}; prints the
// headline figures last.
import { execFileSync, spawn, spawnSync, type ChildProcess, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent as HttpsAgent, request } from 'node:https';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

import * as k8s from '@kubernetes/client-node';

import { launchKubeApiserver, type KubeServer } from '../scripts/lib/kube-server.ts';
import { installCrds } from '../scripts/lib/netplug-crds.ts';
import { makeTopology, type TestNode } from '../test/helpers/nodes.ts';
import { hostInterfaceName } from '../ts/dataplane/index.ts';
import { IPAM_LOCK_FILE } from '../ts/ipam/turns.ts';
import { keys } from '../ts/model/keys.ts';
import { poolResource } from '../ts/model/pool-resource.ts';
import { openStore } from '../ts/store/open.ts';
import { breakdown, interfaceGone, PARTS, type AgentCycle } from './lib/agent-breakdown.ts';
import { medianOf, writeReport, type Series } from './lib/report.ts';
import { runChecked, runtimeEnv, stopNativeRuns } from './lib/run-plugin.ts';
import { summarize } from './lib/stats.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const PROBE = join(ROOT, 'bench/policy-probe.ts');
const CYCLES = Number(process.env['BENCH_CYCLES'] ?? 40);
const WARMUP = 4;
const CREATIONS = Number(process.env['BENCH_CREATIONS'] ?? 30);
const SET_UPDATES = Number(process.env['BENCH_SET_UPDATES'] ?? 40);
const NAMESPACES = 100;
const PODS = Number(process.env['BENCH_PODS'] ?? 10_000);
const NODES = 91;
const POLICIES = 1000;
const RESYNC_POLICIES = Number(process.env['BENCH_RESYNC_POLICIES'] ?? 5000);
const APPS = 10;
const PARALLEL = 48;
const PORT = 8080;
const ON = 'pon';
const OFF = 'poff';
const TARGET = { namespace: 'probe', name: 'target', address: '10.77.0.10' };
const CLIENT_ADDRESS = '10.77.0.20';

// Everything started is stopped in reverse order, once, on success, failure or a signal.
const teardowns: (() => unknown)[] = [];
const collector = { teardown: (fn: () => unknown) => void teardowns.push(fn) };
let cleaned: Promise<void> | undefined;
const cleanup = () =>
  (cleaned ??= (async () => {
    for (const fn of teardowns.reverse())
      try {
        await fn();
      } catch (err) {
        console.error(`cleanup: ${err instanceof Error ? err.message : err}`);
      }
  })());

const scratch = mkdtempSync(join(tmpdir(), 'netplug-bench-policy-'));
collector.teardown(() => rmSync(scratch, { recursive: true, force: true }));
// The built executables, linked (or copied) at the start: a build elsewhere during the run
// replaces dist/ as a whole.
const DIST = join(scratch, 'dist');
const NETPLUG_NODE = join(DIST, 'bin/netplug-node');
const NETPLUG = join(DIST, 'cni/netplug');
const CNI_PATH = `${join(DIST, 'cni')}:/usr/lib/cni`;

const ms = (fromNs: bigint, toNs: bigint) => Number(toNs - fromNs) / 1e6;
const log = (text: string) => console.error(`[bench:policy ${new Date().toISOString().slice(11, 19)}] ${text}`);

/** Runs `work` on every item, at most `limit` at a time. */
async function parallel<T>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) await work(items[i] as T, i);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Polls `check` every `intervalMs` until it is true; throws after `timeoutMs`. */
async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 120_000, intervalMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (
      await Promise.resolve()
        .then(check)
        .catch(() => false)
    )
      return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

interface ProbeReply {
  id: number;
  startNs?: string;
  timeout?: boolean;
  attempts?: number;
  status?: number;
  text?: string;
}

/** bench/policy-probe.ts inside `netns`. */
class Probe {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #pending = new Map<number, (reply: ProbeReply) => void>();
  #next = 1;

  constructor(netns: string) {
    this.#child = spawn('ip', ['netns', 'exec', netns, process.execPath, PROBE], { stdio: ['pipe', 'pipe', 'pipe'] });
    createInterface({ input: this.#child.stdout }).on('line', (line) => {
      const reply = JSON.parse(line) as ProbeReply;
      this.#pending.get(reply.id)?.(reply);
      this.#pending.delete(reply.id);
    });
    this.#child.stderr.resume();
    collector.teardown(() => this.#child.kill('SIGKILL'));
  }

  request(body: Record<string, unknown>): Promise<ProbeReply> {
    const id = this.#next++;
    return new Promise((resolve) => {
      this.#pending.set(id, resolve);
      this.#child.stdin.write(`${JSON.stringify({ id, ...body })}\n`);
    });
  }

  /** Waits until `host` no longer takes connections (untimed): a reset between samples. */
  async closed(host: string): Promise<void> {
    const reply = await this.request({ op: 'closed', host, port: PORT, timeoutMs: 30_000 });
    if (reply.timeout) throw new Error(`${host}:${PORT} still connects after 30 s`);
  }

  async get(path: string): Promise<{ status: number; text: string }> {
    const reply = await this.request({ op: 'get', url: `http://127.0.0.1:9099${path}` });
    return { status: reply.status ?? 0, text: reply.text ?? '' };
  }
}

/** netplug-node on a node of the topology (started here, not by the topology, for its pid). */
class Agent {
  child: ChildProcess | undefined;
  logText = '';
  readonly probe: Probe;

  readonly node: TestNode;
  readonly env: Record<string, string>;
  /** The agent's own timings of the commands it serves (NETPLUG_CNI_TIMINGS_FILE). */
  readonly timings: string;

  constructor(node: TestNode, env: Record<string, string>) {
    this.node = node;
    this.timings = join(scratch, `cni-timings-${node.name}.jsonl`);
    this.env = { ...env, NETPLUG_CNI_TIMINGS_FILE: this.timings };
    this.probe = new Probe(node.netns.name);
    collector.teardown(() => this.stop());
  }

  start(): bigint {
    const started = process.hrtime.bigint();
    this.logText = '';
    this.child = spawn('ip', ['netns', 'exec', this.node.netns.name, NETPLUG_NODE], { env: this.env, stdio: ['ignore', 'ignore', 'pipe'] });
    this.child.stderr?.setEncoding('utf8').on('data', (text: string) => {
      this.logText = (this.logText + text).slice(-20_000);
    });
    return started;
  }

  async stop(): Promise<void> {
    const running = this.child;
    this.child = undefined;
    if (!running || running.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      running.once('exit', () => resolve());
      running.kill('SIGTERM');
      setTimeout(() => running.kill('SIGKILL'), 15_000).unref();
    });
  }

  async ready(timeoutMs = 300_000): Promise<void> {
    await until(
      `${this.node.name}'s agent ready`,
      async () => {
        if (this.child?.exitCode !== null) throw new Error(`netplug-node on ${this.node.name} exited: ${this.logText.slice(-3000)}`);
        return (await this.probe.get('/readyz')).status === 200;
      },
      timeoutMs,
      25,
    ).catch((err: unknown) => {
      throw new Error(`${err instanceof Error ? err.message : err}\n${this.logText.slice(-3000)}`);
    });
  }

  /** The agent's resident memory (its process is the one `ip netns exec` became). */
  rssMiB(): number {
    const status = readFileSync(`/proc/${this.child?.pid}/status`, 'utf8');
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]) / 1024;
  }

  /** CPU seconds the agent has used (user + system, /proc/<pid>/stat, at 100 ticks a second). */
  cpuSeconds(): number {
    const fields = readFileSync(`/proc/${this.child?.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) / 100;
  }

  /** The policy passes so far: their count and total seconds (netplug_policy_flush_duration_seconds). */
  async flushes(): Promise<{ count: number; seconds: number }> {
    const text = (await this.probe.get('/metrics')).text;
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 'NaN');
    return {
      count: value('netplug_policy_flush_duration_seconds_count'),
      seconds: value('netplug_policy_flush_duration_seconds_sum'),
    };
  }
}

/**
 * The API server's REST API as JSON over kept-alive TLS connections, for the bulk creations:
 * client-node opens a connection per request, which halves the rate on this machine.
 */
function bulkClient(kube: KubeServer): (method: string, path: string, body: unknown) => Promise<Record<string, unknown>> {
  const agent = new HttpsAgent({
    keepAlive: true,
    maxSockets: PARALLEL,
    ca: readFileSync(kube.ca),
    cert: readFileSync(kube.admin.cert),
    key: readFileSync(kube.admin.key),
  });
  collector.teardown(() => agent.destroy());
  return (method, path, body) =>
    new Promise((resolve, reject) => {
      const sent = request(`${kube.url}${path}`, { method, agent, headers: { 'content-type': 'application/json' } }, (response) => {
        let text = '';
        response.setEncoding('utf8').on('data', (chunk: string) => {
          text += chunk;
        });
        response.on('end', () =>
          (response.statusCode ?? 0) < 300
            ? resolve(JSON.parse(text) as Record<string, unknown>)
            : reject(new Error(`${method} ${path}: ${response.statusCode} ${text.slice(0, 300)}`)),
        );
      });
      sent.on('error', reject);
      sent.end(JSON.stringify(body));
    });
}

// --- The cluster's objects ---------------------------------------------------------------------

const namespaceName = (n: number) => `bns${n}`;

function remotePod(i: number): { namespace: string; body: k8s.V1Pod & { metadata: { name: string } }; address: string } {
  const node = i % NODES === 0 ? ON : `bench-node-${i % NODES}`;
  return {
    namespace: namespaceName(i % NAMESPACES),
    address: `10.200.${i >> 8}.${i & 255}`,
    body: {
      metadata: { name: `pod${i}`, labels: { app: `app${i % APPS}`, ...(i % 7 === 0 ? { role: 'db' } : {}) } },
      spec: { nodeName: node, containers: [{ name: 'main', image: 'busybox', ports: [{ name: 'http', containerPort: 8080 }] }] },
    },
  };
}

/** Kubernetes NetworkPolicies of the compiler bench's shapes; every one allows from role=db in any namespace (one shared set). */
function clusterPolicy(i: number): { namespace: string; body: Record<string, unknown> } {
  return {
    namespace: namespaceName(i % NAMESPACES),
    body: {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: `np${i}` },
      spec: {
        podSelector: { matchLabels: { app: `app${i % APPS}` } },
        policyTypes: i % 2 === 0 ? ['Ingress', 'Egress'] : ['Ingress'],
        ingress: [
          {
            from: [
              { podSelector: { matchLabels: { app: `app${(i + 1) % APPS}` } } },
              { namespaceSelector: { matchLabels: { team: `t${i % 5}` } } },
              { namespaceSelector: {}, podSelector: { matchLabels: { role: 'db' } } },
            ],
            ports: [{ port: 80 }, { port: 443 }, { port: 'http' }],
          },
        ],
        ...(i % 2 === 0 ? { egress: [{ to: [{ ipBlock: { cidr: '10.0.0.0/8', except: [`10.${i % 200}.0.0/16`] } }] }] } : {}),
      },
    },
  };
}

/** The ADD's namespace: a default-deny ingress policy and 50 others, half of them selecting the ADD's pods. */
function addNamespacePolicies(): k8s.V1NetworkPolicy[] {
  return [
    { metadata: { name: 'default-deny' }, spec: { podSelector: {}, policyTypes: ['Ingress'] } },
    ...Array.from(
      { length: 50 },
      (_, k): k8s.V1NetworkPolicy => ({
        metadata: { name: `add-np${k}` },
        spec: {
          podSelector: { matchLabels: { app: k % 2 === 0 ? 'web' : `other${k}` } },
          ingress: [{ _from: [{ podSelector: { matchLabels: { app: `client${k}` } } }], ports: [{ port: 8000 + k }] }],
        },
      }),
    ),
  ];
}

// --- The measurements --------------------------------------------------------------------------

async function addCycles(kube: KubeServer, core: k8s.CoreV1Api, agents: Record<'on' | 'off', Agent>) {
  const namespace = 'bench-add';
  const samples = { on: [] as number[], off: [] as number[] };
  const cycles = { on: [] as AgentCycle[], off: [] as AgentCycle[] };
  const netns = { on: `nppb-add-on-${process.pid}`, off: `nppb-add-off-${process.pid}` };
  for (const name of Object.values(netns)) {
    execFileSync('ip', ['netns', 'add', name]);
    collector.teardown(() => spawnSync('ip', ['netns', 'del', name]));
  }
  let n = 0;
  const cycle = async (variant: 'on' | 'off'): Promise<AgentCycle> => {
    const agent = agents[variant];
    const pod = `add-${variant}-${n++}`;
    const created = await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: pod, labels: { app: 'web' } },
        spec: { nodeName: agent.node.name, containers: [{ name: 'main', image: 'busybox' }] },
      },
    });
    const netconf = JSON.stringify({
      cniVersion: '1.1.0',
      name: 'bench-policy',
      type: 'netplug',
      nodename: agent.node.name,
      datastore_type: 'kubernetes',
      kubernetes: { kubeconfig: kube.admin.kubeconfig },
      ipam: { type: 'netplug-ipam' },
      // With enforcement, the ADD answers once the pod's policy is in the kernel (its status file).
      ...(variant === 'on'
        ? { policy_setup_timeout_seconds: 30, endpoint_status_dir: join(agent.node.varDir, 'run', 'endpoint-status') }
        : {}),
    });
    const container = `bench${variant}${n}`;
    const env = (command: string) =>
      runtimeEnv(command, container, netns[variant], CNI_PATH, {
        CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${pod};K8S_POD_INFRA_CONTAINER_ID=${container};K8S_POD_UID=${created.metadata?.uid}`,
        NETPLUG_AGENT_SOCKET: join(agent.node.varDir, 'run', 'cni.sock'),
      });
    const add = await runChecked(`enforcement ${variant}`, NETPLUG, env('ADD'), netconf);
    const del = await runChecked(`enforcement ${variant}`, NETPLUG, env('DEL'), netconf);
    await core.deleteNamespacedPod({ namespace, name: pod, gracePeriodSeconds: 0 });
    await interfaceGone(netns[variant]);
    return { container, add, del };
  };
  for (let i = 0; i < WARMUP; i++) for (const variant of ['on', 'off'] as const) await cycle(variant);
  for (let i = 0; i < CYCLES; i++)
    for (const variant of i % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
      const done = await cycle(variant);
      samples[variant].push(done.add.ms);
      cycles[variant].push(done);
    }
  return {
    samples,
    parts: {
      on: breakdown(agents.on.timings, cycles.on, 'ADD'),
      off: breakdown(agents.off.timings, cycles.off, 'ADD'),
    },
  };
}

/** Times `write` until a connection from the client to the target connects (it must not before). */
async function untilOpen(client: Probe, write: () => Promise<unknown>): Promise<number> {
  const open = client.request({ op: 'open', host: TARGET.address, port: PORT, timeoutMs: 30_000 });
  // The prober's first attempts go out (and fail) before the write.
  await sleep(30);
  const started = process.hrtime.bigint();
  await write();
  const reply = await open;
  if (reply.timeout || reply.startNs === undefined) throw new Error('the connection did not open within 30 s of the write');
  return Math.max(0, ms(started, BigInt(reply.startNs)));
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root: the bench makes network namespaces');
  for (const file of ['dist/cni/netplug', 'dist/bin/netplug-node'])
    if (!existsSync(join(ROOT, file))) throw new Error(`${file} is missing: run npm run build`);
  mkdirSync(DIST);
  for (const part of ['bin', 'cni'])
    if (spawnSync('cp', ['-al', join(ROOT, 'dist', part), DIST]).status !== 0) execFileSync('cp', ['-a', join(ROOT, 'dist', part), DIST]);
  const lockDirExisted = existsSync(join(IPAM_LOCK_FILE, '..'));
  const lockExisted = existsSync(IPAM_LOCK_FILE);
  collector.teardown(() => {
    if (!lockExisted) rmSync(IPAM_LOCK_FILE, { force: true });
    if (!lockDirExisted) rmSync(join(IPAM_LOCK_FILE, '..'), { recursive: true, force: true });
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void cleanup().finally(() => process.exit(130)));

  log('starting etcd and kube-apiserver');
  const kube = await launchKubeApiserver(join(scratch, 'kube'));
  collector.teardown(() => kube.stop());
  await installCrds(kube.admin.kubeconfig);
  const config = new k8s.KubeConfig();
  config.loadFromFile(kube.admin.kubeconfig);
  const core = config.makeApiClient(k8s.CoreV1Api);
  const networking = config.makeApiClient(k8s.NetworkingV1Api);
  const api = bulkClient(kube);
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.admin.kubeconfig } });
  await store.commit([
    { key: keys.pool('bench-pods'), create: poolResource('bench-pods', { cidr: '10.78.0.0/16', 'block-size': '26' }, new Date()) },
  ]);
  await store.close();
  for (const name of [ON, OFF]) await core.createNode({ body: { metadata: { name, labels: { 'kubernetes.io/hostname': name } } } });

  const topology = await makeTopology(collector, {
    nodes: [
      { name: ON, subnet: 1 },
      { name: OFF, subnet: 1 },
    ],
    ports: [Number(new URL(kube.url).port)],
    datastoreNetconf: { datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.admin.kubeconfig } },
    agentEnv: {},
  });
  const [onNode, offNode] = topology.nodes as [TestNode, TestNode];
  const agentEnv = (node: TestNode, enforcement: boolean): Record<string, string> => ({
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    NODENAME: node.name,
    DATASTORE_TYPE: 'kubernetes',
    KUBECONFIG: kube.admin.kubeconfig,
    NO_DEFAULT_POOLS: 'true',
    NETPLUG_NETWORKING_BACKEND: 'none',
    NETPLUG_POLICY_ENFORCEMENT: String(enforcement),
    NETPLUG_VAR_DIR: node.varDir,
    NETPLUG_AGENT_SOCKET: join(node.varDir, 'run', 'cni.sock'),
    NETPLUG_ENDPOINT_STATUS_PATH_PREFIX: join(node.varDir, 'run'),
    NETPLUG_HEALTH_ADDR: '127.0.0.1:9099',
  });
  const agents = { on: new Agent(onNode, agentEnv(onNode, true)), off: new Agent(offNode, agentEnv(offNode, false)) };

  // 1. ADD with enforcement on and off.
  log('part 1: ADD through the agent, enforcement on and off');
  await core.createNamespace({ body: { metadata: { name: 'bench-add' } } });
  for (const body of addNamespacePolicies()) await networking.createNamespacedNetworkPolicy({ namespace: 'bench-add', body });
  agents.on.start();
  agents.off.start();
  await Promise.all([agents.on.ready(), agents.off.ready()]);
  const { samples: adds, parts: addParts } = await addCycles(kube, core, agents);
  await stopNativeRuns();
  await Promise.all([agents.on.stop(), agents.off.stop()]);

  // The datastore at size: 10,000 pods (about 110 on the agent's node), 1,000 policies.
  log(`creating ${NAMESPACES} namespaces, ${PODS} pods (with their addresses), ${POLICIES} policies, ${PARALLEL} requests at a time`);
  let populateStart = process.hrtime.bigint();
  await parallel(
    Array.from({ length: NAMESPACES }, (_, n) => n),
    PARALLEL,
    (n) => core.createNamespace({ body: { metadata: { name: namespaceName(n), labels: { team: `t${n % 5}` } } } }),
  );
  await parallel(
    Array.from({ length: PODS }, (_, i) => i),
    PARALLEL,
    async (i) => {
      const { namespace, body, address } = remotePod(i);
      const created = await api('POST', `/api/v1/namespaces/${namespace}/pods`, body);
      created['status'] = { ...(created['status'] as object), phase: 'Running', podIP: address, podIPs: [{ ip: address }] };
      await api('PUT', `/api/v1/namespaces/${namespace}/pods/${body.metadata.name}/status`, created);
      if (i % 2000 === 1999) log(`  ${i + 1} pods`);
    },
  );
  const podsSeconds = ms(populateStart, process.hrtime.bigint()) / 1000;
  populateStart = process.hrtime.bigint();
  await parallel(
    Array.from({ length: POLICIES }, (_, i) => i),
    PARALLEL,
    async (i) => {
      const { namespace, body } = clusterPolicy(i);
      await api('POST', `/apis/networking.k8s.io/v1/namespaces/${namespace}/networkpolicies`, body);
    },
  );
  const policiesSeconds = ms(populateStart, process.hrtime.bigint()) / 1000;
  log(`  pods in ${podsSeconds.toFixed(1)} s, policies in ${policiesSeconds.toFixed(1)} s`);

  // The target pod on the agent's node, ingress only from role=db pods (the set every policy uses);
  // the client plugged into the same node under a name outside the workload prefix, so that only the
  // target's chains judge its connections.
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
  const client = new Probe(clientNetns);

  log('the agent at 1,000 policies and 10,000 pods');
  const agent = agents.on;
  const started1000 = agent.start();
  await agent.ready();
  const ready1000 = ms(started1000, process.hrtime.bigint()) / 1000;
  const flush1000 = await agent.flushes();
  await client.closed(TARGET.address);

  // 2. A policy created until a connection it allows connects.
  log(`part 2: ${CREATIONS} policies created, each until its effect on a connection`);
  const passesBefore2 = await agent.flushes();
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

  // 3. A pod joins the set every policy uses: from its address written until its connection is allowed.
  log(`part 3: ${SET_UPDATES} pods added to the set 1,000 policies use`);
  const passesBefore3 = await agent.flushes();
  const setUpdates: number[] = [];
  for (let i = 0; i < SET_UPDATES; i++) {
    const namespace = namespaceName(i % NAMESPACES);
    const name = `db-client-${i}`;
    const pod = await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name, labels: { role: 'db', app: 'client' } },
        spec: { nodeName: 'bench-node-7', containers: [{ name: 'main', image: 'busybox' }] },
      },
    });
    // The pod without an address is seen and passed over first (no element to add yet).
    await sleep(200);
    pod.status = { ...pod.status, phase: 'Running', podIP: CLIENT_ADDRESS, podIPs: [{ ip: CLIENT_ADDRESS }] };
    setUpdates.push(await untilOpen(client, () => core.replaceNamespacedPodStatus({ namespace, name, body: pod })));
    await core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
    await client.closed(TARGET.address);
  }
  const passesAfter3 = await agent.flushes();
  const meanPassMs = (from: { count: number; seconds: number }, to: { count: number; seconds: number }) =>
    (1000 * (to.seconds - from.seconds)) / (to.count - from.count);
  const rss1000 = agent.rssMiB();

  // 4. A full resync at 5,000 policies: the agent restarted onto an empty table.
  log(`part 4: ${RESYNC_POLICIES - POLICIES} more policies, then the agent restarted`);
  await agent.stop();
  await parallel(
    Array.from({ length: RESYNC_POLICIES - POLICIES }, (_, i) => i + POLICIES),
    PARALLEL,
    async (i) => {
      const { namespace, body } = clusterPolicy(i);
      await api('POST', `/apis/networking.k8s.io/v1/namespaces/${namespace}/networkpolicies`, body);
    },
  );
  // Without the table the first pass writes the whole part, as on a node's first start.
  spawnSync('ip', ['netns', 'exec', onNode.netns.name, 'nft', 'delete', 'table', 'inet', 'netplug']);
  const started5000 = agent.start();
  let firstPass: { count: number; seconds: number; cpu: number } | undefined;
  await until(
    'the first policy pass at 5,000 policies',
    async () => {
      if (agent.child?.exitCode !== null) throw new Error(`netplug-node exited: ${agent.logText.slice(-3000)}`);
      const flushes = await agent.flushes();
      if (flushes.count >= 1) firstPass = { ...flushes, cpu: agent.cpuSeconds() };
      return flushes.count >= 1;
    },
    300_000,
    20,
  );
  await agent.ready();
  const ready5000 = ms(started5000, process.hrtime.bigint()) / 1000;
  // The target is policed again: the client's connections are dropped.
  await client.closed(TARGET.address);
  await sleep(3000);
  const rss5000 = agent.rssMiB();
  const resyncSeconds = firstPass?.seconds ?? Number.NaN;

  const series: Series[] = [
    { group: 'ADD through the agent (51 policies in the namespace)', label: 'enforcement on', samplesMs: adds.on },
    { group: 'ADD through the agent (51 policies in the namespace)', label: 'enforcement off', samplesMs: adds.off },
    {
      group: `a policy created → seen on a connection (${POLICIES} policies, ${PODS} pods)`,
      label: 'enforcement on',
      samplesMs: creations,
    },
    { group: `a pod added to the set ${POLICIES} policies use → its connection allowed`, label: 'enforcement on', samplesMs: setUpdates },
    ...(['on', 'off'] as const).flatMap((variant) =>
      PARTS.map((part) => ({ group: `ADD, enforcement ${variant}: where the time goes`, label: part, samplesMs: addParts[variant][part] })),
    ),
  ];
  const group0 = series[0]?.group ?? '';
  const addRatio = medianOf(series, group0, 'enforcement on') / medianOf(series, group0, 'enforcement off');
  const enforceP99 = summarize(creations).p99Ms;
  const setP99 = summarize(setUpdates).p99Ms;
  const ratios = [
    { label: 'ADD, enforcement on / off, median (target ≤ 1.15)', value: addRatio },
    { label: 'ADD, enforcement on, p99 (ms)', value: summarize(adds.on).p99Ms },
    { label: 'ADD, enforcement off, p99 (ms)', value: summarize(adds.off).p99Ms },
    { label: 'policy created → effect, p50 (ms)', value: summarize(creations).medianMs },
    { label: 'policy created → effect, p99 (ms; target ≤ 200)', value: enforceP99 },
    { label: 'pod added to a shared set → allowed, p50 (ms)', value: summarize(setUpdates).medianMs },
    { label: 'pod added to a shared set → allowed, p99 (ms; target ≤ 20)', value: setP99 },
    { label: `first policy pass after a restart at ${POLICIES} policies (s; passes ${flush1000.count})`, value: flush1000.seconds },
    { label: `agent start → ready at ${POLICIES} policies (s)`, value: ready1000 },
    {
      label: `the agent's policy passes during part 2, mean (ms; ${passesBefore3.count - passesBefore2.count} passes)`,
      value: meanPassMs(passesBefore2, passesBefore3),
    },
    {
      label: `the agent's policy passes during part 3, mean (ms; ${passesAfter3.count - passesBefore3.count} passes)`,
      value: meanPassMs(passesBefore3, passesAfter3),
    },
    { label: `agent VmRSS at ${POLICIES} policies, ${PODS} pods (MiB)`, value: rss1000 },
    { label: `full resync at ${RESYNC_POLICIES} policies: first policy pass (s; target ≤ 1)`, value: resyncSeconds },
    {
      label: `agent CPU time, start → its first policy pass done, at ${RESYNC_POLICIES} policies (s; passes ${firstPass?.count})`,
      value: firstPass?.cpu ?? Number.NaN,
    },
    { label: `agent start → ready at ${RESYNC_POLICIES} policies (s)`, value: ready5000 },
    { label: `agent VmRSS at ${RESYNC_POLICIES} policies, ${PODS} pods (MiB; target ≤ 300)`, value: rss5000 },
    { label: `creating ${PODS} Pod objects with their addresses, ${PARALLEL} at a time (s)`, value: podsSeconds },
  ];
  const table = writeReport({
    name: 'policy',
    title: 'Network policy enforced by netplug-node: ADD, policy and set changes, resync',
    series,
    ratios,
    notes: [
      'A real kube-apiserver with its etcd on loopback (the Kubernetes datastore); two nodes, each a network namespace reaching it through a relay (test/helpers/nodes.ts), each running the built dist/bin/netplug-node with NETPLUG_NETWORKING_BACKEND=none; one with NETPLUG_POLICY_ENFORCEMENT=true, one without.',
      `ADD: ${CYCLES} ADDs per variant (after ${WARMUP} warm-up each) of a pod labelled app=web in a namespace with a default-deny ingress policy and 50 other policies (25 selecting the pod), through the shim and its node's agent, spawned natively (bench/lib/run-plugin.ts) and timed from spawn to exit; enforcement on and off alternate pod by pod. With enforcement the netconf has policy_setup_timeout_seconds and the agent's endpoint_status_dir, so the ADD answers once the pod's policy is in the kernel; without, it has neither. Each cycle creates the Pod object first and deletes it after the DEL (untimed).`,
      `The datastore at size: ${NAMESPACES} namespaces, ${PODS} Pod objects with their addresses (${Math.ceil(PODS / NODES)} on the enforcing node, none of them a real interface: local endpoints with chains; the rest on ${NODES - 1} other nodes), ${POLICIES} Kubernetes NetworkPolicies of the compiler bench's shapes, each allowing ingress from role=db pods of any namespace (one set, which every policy uses).`,
      'Connections: a target pod (a network namespace plugged into the enforcing node as the plugin plugs it, with its Pod object) takes ingress only from role=db pods; a client namespace plugged into the same node under a host interface outside the workload prefix connects to it. bench/policy-probe.ts in the client opens a new TCP connection every millisecond (each given 200 ms); a figure runs from the API request of the write (taken just before it) to the start of the first attempt that connected, on the monotonic clock both processes share (1 ms resolution). Between samples the write is undone and the bench waits (untimed) until 40 attempts in a row fail.',
      `Policy created: ${CREATIONS} times a NetworkPolicy allowing the client's address (ipBlock /32) to the target is created, then deleted.`,
      `Set update: ${SET_UPDATES} times a Pod object labelled role=db on another node is created without an address, and 200 ms later its status is written with the client's address; timed from that write. Then the pod is deleted.`,
      `Resync: the agent stopped, ${RESYNC_POLICIES - POLICIES} more policies created (${RESYNC_POLICIES} in all), netplug's table deleted from the node, the agent started; the figure is the agent's own first policy pass (netplug_policy_flush_duration_seconds: every input fed to the compiler, the whole part written to the kernel, the status files), read from its /metrics; start → ready includes the informers' lists of ${PODS} pods and ${RESYNC_POLICIES} policies. VmRSS from /proc/<pid>/status 3 s after ready. The figure at ${POLICIES} policies is the same, at the start before parts 2 and 3 (onto an empty table).`,
      "Where an ADD's time goes: per ADD, from each agent's own timings (NETPLUG_CNI_TIMINGS_FILE) on the monotonic clock the spawner shares, as bench:agent splits it (bench/lib/agent-breakdown.ts); with enforcement, the agent's policy pass for the new pod and the wait for its status file are in the agent's own work.",
      "The agent's policy passes during parts 2 and 3: the mean of netplug_policy_flush_duration_seconds over the passes of each part (from /metrics before and after), to tell the agent's pass from the rest of a figure (the API server's watch, the controller's 50 ms settle, the prober).",
      'The agent CPU time at the resync is user + system from /proc/<pid>/stat, from its start until its first policy pass was seen done (polled every 20 ms): on a loaded machine it says more than wall time.',
      'The machine has 2 cores, shared during the run with other work (a test run, other builds): medians, ratios and p99 are noisy.',
    ],
  });
  console.log(table);
  console.log('\nwrote bench/results/policy.{md,json,svg}\n');
  console.log(`policy add ratio: ${addRatio.toFixed(2)}`);
  console.log(`policy enforce p99 ms: ${enforceP99.toFixed(1)}`);
  console.log(`policy set update p99 ms: ${setP99.toFixed(1)}`);
  console.log(`policy resync 5000 seconds: ${resyncSeconds.toFixed(2)}`);
  console.log(`agent rss MiB: ${rss5000.toFixed(0)}`);
}

main()
  .catch((err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exitCode = 1;
  })
  .finally(async () => {
    await stopNativeRuns();
    await cleanup();
  });
