// npm run bench:agent: the fast path (the netplug shim forwarding to netplug-node) measured in one
// run against Debian's ptp + host-local, and the one-shot plugin against itself as it was.
//   per pod:   ADD and DEL of one pod, each a fresh process as a runtime runs it (spawned natively,
//              bench/lib/native-exec.ts, not by Node's dearer spawn): netplug through
//              the agent, netplug with no agent (the shim runs the one-shot), the one-shot run
//              directly (the path before the shim), ptp + host-local; variants rotated pod by pod;
//   burst:     100 ADDs started at once on one node, timed until every pod is networked, then 100
//              DELs; through the agent, against the same bursts of ptp + host-local;
//   shim:      the shim's own cost, from spawn until its request has reached an agent that answers
//              at once, against spawning /bin/true, both spawned natively by the stand-in agent
//              (crates/netplug-shim/examples/launch-timer.rs); and its size;
//   breakdown: per ADD and DEL through the agent, medians of where the time goes: the shim (its
//              process, before the agent accepts its connection and after the answer), the
//              handshake, the datastore, the kernel outside the datastore's time, and the rest
//              (the agent's own work), from the agent's own timings (NETPLUG_CNI_TIMINGS_FILE) on
//              the monotonic clock the spawner shares;
//   kubelet:   see bench/agent-kubelet.ts (a 100-replica Deployment under the real kubelet).
// The agent is the built netplug-node, on a real etcd, with a real kube-apiserver for its Node.
// Writes bench/results/agent.{md,json,svg}; prints the headline ratios last.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import * as k8s from '@kubernetes/client-node';

import { launchEtcd, freePort, type EtcdServer } from '../scripts/lib/etcd-server.ts';
import { launchKubeApiserver, type KubeServer } from '../scripts/lib/kube-server.ts';
import { buildNativeHelpers, LAUNCH_TIMER } from './lib/native-exec.ts';
import { medianOf, writeReport, type Series } from './lib/report.ts';
import { addDelSamples, runChecked, runtimeEnv, runToExit, stopNativeRuns, type Run } from './lib/run-plugin.ts';
import { elapsedMs, summarize } from './lib/stats.ts';
import { breakdown, interfaceGone, ROWS, type AgentCycle } from './lib/agent-breakdown.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const SHIM = join(ROOT, 'dist/cni/netplug');
const ONE_SHOT = join(ROOT, 'dist/cni/netplug-oneshot');
const NETPLUG_NODE = join(ROOT, 'dist/bin/netplug-node');
const NETPLUGCTL = join(ROOT, 'dist/bin/netplugctl');
const PTP = '/usr/lib/cni/ptp';
const CNI_PATH = `${join(ROOT, 'dist/cni')}:/usr/lib/cni`;
const CYCLES = Number(process.env['BENCH_CYCLES'] ?? 60);
const WARMUP = 5;
const BURST = 100;
const BURST_ROUNDS = 3;
const SHIM_RUNS = 200;
const NODE = 'bench-agent-node';
// The one-shot variants allocate on a node of their own: on a real node only one manager allocates,
// and a one-shot's writes in the agent's block would make every agent ADD commit on stale facts.
const ONE_SHOT_NODE = 'bench-oneshot-node';

type Variant = 'agent' | 'fallback' | 'oneshot' | 'ptp';
const LABELS: Record<Variant, string> = {
  agent: 'netplug via netplug-node (fast path)',
  fallback: 'netplug, no agent (shim runs the one-shot)',
  oneshot: 'netplug-oneshot run directly (before the shim)',
  ptp: 'ptp + host-local',
};
const VARIANTS: Variant[] = ['agent', 'fallback', 'oneshot', 'ptp'];

const scratch = mkdtempSync(join(tmpdir(), 'netplug-bench-agent-'));
const socket = join(scratch, 'run/cni.sock');
const TIMINGS = join(scratch, 'cni-timings.jsonl');
const namespaces: string[] = [];
let etcd: EtcdServer | undefined;
let kube: KubeServer | undefined;
let agent: ReturnType<typeof spawn> | undefined;

function netconf(variant: Variant, endpoints: string): string {
  if (variant === 'ptp')
    return JSON.stringify({
      cniVersion: '1.0.0',
      name: 'bench-ptp',
      type: 'ptp',
      ipam: { type: 'host-local', dataDir: join(scratch, 'host-local'), ranges: [[{ subnet: '10.243.0.0/16' }]] },
    });
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'bench-netplug',
    type: 'netplug',
    etcd_endpoints: endpoints,
    nodename: variant === 'agent' ? NODE : ONE_SHOT_NODE,
    // As netplug's manifests and install-cni write the netconf: every command logs to this file.
    log_file_path: join(scratch, 'log/cni.log'),
    ipam: { type: 'netplug-ipam' },
  });
}

function executable(variant: Variant): string {
  return { agent: SHIM, fallback: SHIM, oneshot: ONE_SHOT, ptp: PTP }[variant];
}

function cniEnv(variant: Variant, command: string, container: string, netns: string): Record<string, string> {
  return runtimeEnv(command, container, netns, CNI_PATH, {
    // As the kubelet calls: the pod's names in CNI_ARGS (ptp and host-local ignore them).
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=${container};K8S_POD_INFRA_CONTAINER_ID=${container}`,
    // No agent at the other path: the shim falls back to the one-shot.
    NETPLUG_AGENT_SOCKET: variant === 'agent' ? socket : join(scratch, 'absent.sock'),
  });
}

/** One command to its exit; resolves whatever the exit status. */
const runAsync = (variant: Variant, command: string, container: string, netns: string, conf: string): Promise<Run> =>
  runToExit(executable(variant), cniEnv(variant, command, container, netns), conf);

/** One command to its exit; throws, naming the variant and the plugin's output, unless it exits 0. */
const runOk = (variant: Variant, command: string, container: string, netns: string, conf: string): Promise<Run> =>
  runChecked(LABELS[variant], executable(variant), cniEnv(variant, command, container, netns), conf);

function addNamespace(name: string): string {
  execFileSync('ip', ['netns', 'add', name]);
  namespaces.push(name);
  return name;
}

function httpStatus(url: string): Promise<number> {
  return new Promise((resolve) => {
    get(url, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    }).on('error', () => resolve(0));
  });
}

/** netplug-node on the bench's etcd, serving the CNI socket; resolves once it is ready. */
async function startAgent(endpoints: string, kubeconfig: string): Promise<void> {
  const port = await freePort();
  mkdirSync(join(scratch, 'var'), { recursive: true });
  agent = spawn(NETPLUG_NODE, [], {
    env: {
      PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
      NODENAME: NODE,
      DATASTORE_TYPE: 'etcdv3',
      ETCD_ENDPOINTS: endpoints,
      KUBECONFIG: kubeconfig,
      NO_DEFAULT_POOLS: 'true',
      NETPLUG_VAR_DIR: join(scratch, 'var'),
      NETPLUG_HEALTH_ADDR: `127.0.0.1:${port}`,
      NETPLUG_AGENT_SOCKET: socket,
      NETPLUG_CNI_TIMINGS_FILE: TIMINGS,
      // The fast path alone: no routes between nodes in the host's namespace.
      NETPLUG_NETWORKING_BACKEND: 'none',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  agent.stderr?.on('data', (chunk: Buffer) => (log = (log + chunk).slice(-4000)));
  for (let i = 0; i < 600; i++) {
    if (agent.exitCode !== null) throw new Error(`netplug-node exited ${agent.exitCode}: ${log}`);
    if (existsSync(socket) && (await httpStatus(`http://127.0.0.1:${port}/readyz`)) === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`netplug-node not ready after 60 s: ${log}`);
}

async function perPod(endpoints: string) {
  const netns = addNamespace(`npbench-agent-${process.pid}`);
  const samples = addDelSamples(VARIANTS);
  const agentCycles: AgentCycle[] = [];
  let pod = 0;
  const cycle = async (variant: Variant): Promise<[Run, Run, string]> => {
    const container = `bench-${variant}-${pod++}`;
    const conf = netconf(variant, endpoints);
    const add = await runOk(variant, 'ADD', container, netns, conf);
    const del = await runOk(variant, 'DEL', container, netns, conf);
    await interfaceGone(netns);
    return [add, del, container];
  };
  for (let i = 0; i < WARMUP; i++) for (const variant of VARIANTS) await cycle(variant);
  for (let i = 0; i < CYCLES; i++) {
    // Rotate the order so that no variant always follows another's veth deletion.
    const order = VARIANTS.map((_, k) => VARIANTS[(i + k) % VARIANTS.length] as Variant);
    for (const variant of order) {
      const [add, del, container] = await cycle(variant);
      samples[variant].add.push(add.ms);
      samples[variant].del.push(del.ms);
      if (variant === 'agent') agentCycles.push({ container, add, del });
    }
  }
  return { samples, agentCycles };
}

/** Each pod's eth0 holds the address its ADD returned, and no two pods share one. */
function checkNetworked(pods: string[], adds: Run[], label: string): void {
  const failed = adds.filter((a) => a.status !== 0);
  if (failed.length > 0) throw new Error(`${failed.length} of ${pods.length} ${label} ADDs failed: ${failed[0]?.stdout}`);
  const returned = adds.map((a) => String(JSON.parse(a.stdout).ips[0].address).split('/')[0]);
  if (new Set(returned).size !== pods.length)
    throw new Error(`${label}: ${pods.length} ADDs returned ${new Set(returned).size} distinct addresses`);
  pods.forEach((netns, i) => {
    const shown = execFileSync('ip', ['-n', netns, '-4', '-o', 'addr', 'show', 'dev', 'eth0'], { encoding: 'utf8' });
    if (!shown.includes(` ${returned[i]}/`)) throw new Error(`${label}: ${netns} has not ${returned[i]} on eth0: ${shown}`);
  });
}

async function burst(endpoints: string) {
  const pods = Array.from({ length: BURST }, (_, i) => addNamespace(`npbench-ab-${process.pid}-${i}`));
  const samples = { agent: { add: [] as number[], del: [] as number[] }, ptp: { add: [] as number[], del: [] as number[] } };
  for (let round = 0; round < BURST_ROUNDS; round++) {
    for (const variant of ['agent', 'ptp'] as const) {
      const conf = netconf(variant, endpoints);
      const container = (i: number) => `burst-${variant}-${round}-${i}`;
      let start = process.hrtime.bigint();
      const adds = await Promise.all(pods.map((netns, i) => runAsync(variant, 'ADD', container(i), netns, conf)));
      samples[variant].add.push(elapsedMs(start));
      checkNetworked(pods, adds, LABELS[variant]);
      start = process.hrtime.bigint();
      const dels = await Promise.all(pods.map((netns, i) => runAsync(variant, 'DEL', container(i), netns, conf)));
      samples[variant].del.push(elapsedMs(start));
      if (dels.some((d) => d.status !== 0)) throw new Error(`${LABELS[variant]}: a DEL of the burst failed`);
      await Promise.all(pods.map(interfaceGone));
    }
  }
  return samples;
}

/**
 * The shim's own cost: spawn until an instantly answering agent has its request, and to exit,
 * against /bin/true; launch-timer spawns both as a runtime does and plays the agent itself.
 */
function shimCost() {
  const out = execFileSync(LAUNCH_TIMER, [SHIM, join(scratch, 'instant.sock'), String(SHIM_RUNS)], { encoding: 'utf8' });
  const { forwarded_ns, total_ns, floor_ns } = JSON.parse(out) as Record<'forwarded_ns' | 'total_ns' | 'floor_ns', number[]>;
  const ms = (values: number[]) => values.map((ns) => ns / 1e6);
  return { forwarded: ms(forwarded_ns), total: ms(total_ns), floor: ms(floor_ns), bytes: statSync(SHIM).size };
}

async function cleanup(): Promise<void> {
  if (agent && agent.exitCode === null) {
    agent.kill('SIGTERM');
    await new Promise((resolve) => agent?.once('exit', resolve));
  }
  await stopNativeRuns();
  for (const netns of namespaces) spawnSync('ip', ['netns', 'del', netns]);
  await kube?.stop();
  await etcd?.stop();
  rmSync(scratch, { recursive: true, force: true });
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root: ADD creates interfaces in namespaces');
  for (const file of [SHIM, ONE_SHOT, NETPLUG_NODE]) if (!existsSync(file)) throw new Error(`${file} is missing: run npm run build`);
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  buildNativeHelpers();
  etcd = await launchEtcd(join(scratch, 'etcd'));
  kube = await launchKubeApiserver(join(scratch, 'kube'));
  const admin = new k8s.KubeConfig();
  admin.loadFromFile(kube.admin.kubeconfig);
  await admin.makeApiClient(k8s.CoreV1Api).createNode({ body: { metadata: { name: NODE } } });
  execFileSync(NETPLUGCTL, ['pool', 'create', 'bench', '--cidr', '10.246.0.0/16'], { env: { ETCD_ENDPOINTS: etcd.endpoints } });
  await startAgent(etcd.endpoints, kube.admin.kubeconfig);

  const shim = shimCost();
  const { samples, agentCycles } = await perPod(etcd.endpoints);
  const parts = { ADD: breakdown(TIMINGS, agentCycles, 'ADD'), DEL: breakdown(TIMINGS, agentCycles, 'DEL') };
  const bursts = await burst(etcd.endpoints);

  const series: Series[] = [
    ...VARIANTS.map((v) => ({ group: 'ADD', label: LABELS[v], samplesMs: samples[v].add })),
    ...VARIANTS.map((v) => ({ group: 'DEL', label: LABELS[v], samplesMs: samples[v].del })),
    ...VARIANTS.map((v) => ({
      group: 'ADD + DEL of one pod',
      label: LABELS[v],
      samplesMs: samples[v].add.map((ms, i) => ms + (samples[v].del[i] ?? 0)),
    })),
    { group: `${BURST} ADDs at once on one node`, label: LABELS.agent, samplesMs: bursts.agent.add },
    { group: `${BURST} ADDs at once on one node`, label: LABELS.ptp, samplesMs: bursts.ptp.add },
    { group: `${BURST} DELs at once on one node`, label: LABELS.agent, samplesMs: bursts.agent.del },
    { group: `${BURST} DELs at once on one node`, label: LABELS.ptp, samplesMs: bursts.ptp.del },
    ...(['ADD', 'DEL'] as const).flatMap((command) =>
      ROWS.map((part) => ({
        group: `${command} through the agent, where the time goes`,
        label: part,
        samplesMs: parts[command][part],
      })),
    ),
    { group: 'shim', label: 'spawn → request at an instant agent', samplesMs: shim.forwarded },
    { group: 'shim', label: 'spawn → exit, VERSION via an instant agent', samplesMs: shim.total },
    { group: 'shim', label: 'spawn → exit of /bin/true (the floor)', samplesMs: shim.floor },
  ];
  const median = (group: string, label: string) => medianOf(series, group, label);
  const ratio = (group: string, a: Variant, b: Variant) => median(group, LABELS[a]) / median(group, LABELS[b]);
  const burstAdd = summarize(bursts.agent.add).medianMs / 1000;
  const burstDel = summarize(bursts.agent.del).medianMs / 1000;
  const ratios = [
    { label: 'agent / ptp + host-local, ADD median', value: ratio('ADD', 'agent', 'ptp') },
    { label: 'agent / ptp + host-local, ADD + DEL median', value: ratio('ADD + DEL of one pod', 'agent', 'ptp') },
    { label: 'agent / ptp + host-local, DEL median', value: ratio('DEL', 'agent', 'ptp') },
    { label: 'shim without agent / one-shot direct, ADD + DEL median', value: ratio('ADD + DEL of one pod', 'fallback', 'oneshot') },
    { label: `${BURST} ADDs through the agent, median wall time (s)`, value: burstAdd },
    { label: `${BURST} DELs through the agent, median wall time (s)`, value: burstDel },
    {
      label: `${BURST} ADDs, agent / ptp + host-local, median`,
      value: burstAdd / (summarize(bursts.ptp.add).medianMs / 1000),
    },
    { label: 'shim: spawn → request forwarded, median (ms)', value: median('shim', 'spawn → request at an instant agent') },
    { label: 'shim: size (MB)', value: shim.bytes / 1e6 },
  ];
  const table = writeReport({
    name: 'agent',
    title: 'The fast path: the netplug shim and netplug-node against ptp + host-local',
    series,
    ratios,
    notes: [
      "A real etcd and a real kube-apiserver on loopback; netplug-node (dist/bin/netplug-node) runs on the host with its own etcd connection and serves the CNI socket; netplug-ipam on that etcd, pool 10.246.0.0/16. The one-shot variants allocate as another node, so that the agent is its node's only allocator, as on a real node. netplug's netconf has a log_file_path, as netplug's manifests and install-cni write it: every command logs to that file (netplug-node keeps it open between the commands it serves).",
      `Per pod: ${CYCLES} ADD + DEL cycles per variant into one namespace (after ${WARMUP} warm-up cycles), IPv4, each command a fresh process timed from spawn to exit, the variants rotated pod by pod.`,
      "Every command is spawned as a container runtime spawns it (Go's os/exec in containerd; here Rust's posix_spawn, crates/netplug-shim/examples/exec-server.rs) and timed natively. Not by Node's spawn, which costs ~3 ms more per process on this VM and would add that to every variant.",
      `Burst: ${BURST} ADDs spawned at once into ${BURST} namespaces, timed until the last exits, then every pod checked for the address its ADD returned (distinct); then ${BURST} DELs at once, checked gone. ${BURST_ROUNDS} rounds per variant.`,
      `Shim: ${SHIM_RUNS} runs of VERSION against a stand-in agent that answers at once (crates/netplug-shim/examples/launch-timer.rs, which also spawns the shim as a runtime does), timed from spawn until its request frames have arrived, and to exit; /bin/true spawned the same way is the floor of any process.`,
      'The one-shot no slower than before: the shim with no agent (it runs netplug-oneshot in its place) against netplug-oneshot run directly.',
      "Where the time goes: per ADD and DEL of the per-pod run through the agent, from the agent's own timings (NETPLUG_CNI_TIMINGS_FILE: the connection accepted, go received, the answer written, and the time a datastore request or a kernel call of the command was under way) on the monotonic clock the spawner shares. The shim's part is its process before the agent accepted its connection and after the answer was written; the handshake is from the accept to go; the kernel's is its time outside the datastore's (the veth is set up while the commit is in flight); the rest is the agent's own work. Each part's median is over the commands; the medians of the parts need not add up to the command's. The last row is a span across the parts, not one of them: from go until the command's first datastore request was made (the commit of a steady ADD), the agent's work that the commit waits for, with kernel calls (the interface's presence) beside it.",
      "Between cycles the bench waits, untimed, until the pod's eth0 is gone: a DEL through the agent answers while the kernel is still deleting the veth, and a runtime never reuses a namespace as the bench does.",
    ],
  });
  console.log(table);
  console.log('\nwrote bench/results/agent.{md,json,svg}\n');
  // The kubelet part ran just before (npm run bench:agent runs bench/agent-kubelet.ts first).
  const kubelet = new URL('results/agent-kubelet.json', import.meta.url);
  if (existsSync(kubelet))
    for (const { label, value } of JSON.parse(readFileSync(kubelet, 'utf8')).ratios as { label: string; value: number }[])
      console.log(`kubelet, 100 replicas, ${label}: ${value.toFixed(2)}`);
  console.log(`agent/ptp ADD median ratio: ${ratio('ADD', 'agent', 'ptp').toFixed(2)}`);
  console.log(`agent/ptp ADD+DEL median ratio: ${ratio('ADD + DEL of one pod', 'agent', 'ptp').toFixed(2)}`);
  for (const command of ['ADD', 'DEL'] as const)
    console.log(
      `${command} through the agent, median ms: ${ROWS.map((part) => `${part} ${summarize(parts[command][part]).medianMs.toFixed(2)}`).join('; ')}`,
    );
  console.log(`burst100 ADD seconds: ${burstAdd.toFixed(2)}`);
  console.log(`burst100 DEL seconds: ${burstDel.toFixed(2)}`);
}

main()
  .catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exitCode = 1;
  })
  .finally(cleanup);
