// npm run bench:k8s: netplug in Kubernetes mode against a real kube-apiserver, measured in one run
// against Debian's ptp + host-local (which reads no API at all).
//   per pod:   ADD + DEL by the built netplug with policy.type k8s (the pod and its namespace read
//              from the API), netplug-ipam on etcd and on the Kubernetes datastore; the variants
//              interleaved pod by pod;
//   requests:  API requests per ADD and per DEL, from the API server's own request counter;
//   gates:     an ADD behind a readiness gate that turns ready 1 s after the ADD starts;
//   policy:    an ADD waiting for the policy agent's status file, written 300 ms after the ADD
//              starts, and one for a file never written (policy_setup_timeout_seconds 2);
//   burst:     30 address assignments at once on one node through the netplug-ipam executable,
//              on etcd and on the Kubernetes datastore, against the same burst of host-local.
// Writes bench/results/k8s.{md,json,svg}.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import * as k8s from '@kubernetes/client-node';

import { IPAM_LOCK_FILE } from '../ts/ipam/turns.ts';
import { statusFileName } from '../ts/plugin/policy-wait.ts';
import { launchKubeApiserver, type KubeServer } from '../scripts/lib/kube-server.ts';
import { installCrds } from '../scripts/lib/netplug-crds.ts';
import { launchEtcd, type EtcdServer } from '../scripts/lib/etcd-server.ts';
import { requestCounts, totalRequests } from './lib/api-requests.ts';
import { medianOf, writeReport, type Series } from './lib/report.ts';
import { addDelSamples, runChecked, runtimeEnv, stopNativeRuns } from './lib/run-plugin.ts';
import { elapsedMs } from './lib/stats.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const NETPLUG = join(ROOT, 'dist/cni/netplug');
const NETPLUGCTL = join(ROOT, 'dist/bin/netplugctl');
const PTP = '/usr/lib/cni/ptp';
const CNI_PATH = `${join(ROOT, 'dist/cni')}:/usr/lib/cni`;
const CYCLES = 40;
const WARMUP = 3;
const WAIT_ROUNDS = 5;
const BURST = 30;
const BURST_ROUNDS = 3;
const NETPLUG_IPAM = join(ROOT, 'dist/cni/netplug-ipam');
const HOST_LOCAL = '/usr/lib/cni/host-local';
const NODE = 'bench-k8s-node';
const NAMESPACE = 'bench';

type Variant = 'etcd' | 'kdd' | 'ptp';
const LABELS: Record<Variant, string> = {
  etcd: 'netplug, Kubernetes mode, netplug-ipam on etcd',
  kdd: 'netplug, Kubernetes mode, Kubernetes datastore',
  ptp: 'ptp + host-local',
};

const scratch = mkdtempSync(join(tmpdir(), 'netplug-bench-k8s-'));
const statusDir = join(scratch, 'endpoint-status');
let netns: string | undefined;
let kube: KubeServer | undefined;
let etcd: EtcdServer | undefined;

function netconf(variant: Variant, kubeconfig: string, extra: Record<string, unknown> = {}): string {
  if (variant === 'ptp') {
    return JSON.stringify({
      cniVersion: '1.0.0',
      name: 'bench-ptp',
      type: 'ptp',
      ipam: { type: 'host-local', dataDir: join(scratch, 'host-local'), ranges: [[{ subnet: '10.245.0.0/16' }]] },
    });
  }
  const datastore = variant === 'etcd' ? { etcd_endpoints: etcd?.endpoints } : { datastore_type: 'kubernetes' };
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: `bench-${variant}`,
    type: 'netplug',
    nodename: NODE,
    ...datastore,
    kubernetes: { kubeconfig },
    policy: { type: 'k8s' },
    ipam: { type: 'netplug-ipam' },
    ...extra,
  });
}

function cniEnv(command: string, container: string, pod: string): Record<string, string> {
  return runtimeEnv(command, container, netns as string, CNI_PATH, {
    CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${NAMESPACE};K8S_POD_NAME=${pod};K8S_POD_INFRA_CONTAINER_ID=${container}`,
  });
}

/** One command to its exit, timed; this process serves the gate or writes the status file meanwhile. */
const run = async (variant: Variant, command: string, container: string, pod: string, conf: string): Promise<number> =>
  (await runChecked(variant, variant === 'ptp' ? PTP : NETPLUG, cniEnv(command, container, pod), conf)).ms;

/** The API server's count of requests it has handled (apiserver_request_total, every verb and resource). */
function apiRequests(server: KubeServer): Promise<number> {
  return new Promise((resolve, reject) => {
    const url = new URL('/metrics', server.url);
    request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        ca: readFileSync(server.ca),
        cert: readFileSync(server.admin.cert),
        key: readFileSync(server.admin.key),
      },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk));
        response.on('end', () => resolve(totalRequests(requestCounts(text))));
      },
    )
      .on('error', reject)
      .end();
  });
}

async function setUpCluster(server: KubeServer): Promise<string> {
  const config = new k8s.KubeConfig();
  config.loadFromFile(server.admin.kubeconfig);
  const core = config.makeApiClient(k8s.CoreV1Api);
  const rbac = config.makeApiClient(k8s.RbacAuthorizationV1Api);
  await installCrds(server.admin.kubeconfig);
  // The plugin's identity with the shipped ClusterRoles, as an operator would bind them.
  for (const role of k8s.loadAllYaml(readFileSync(join(ROOT, 'deploy/rbac/netplug-cni.yaml'), 'utf8')) as k8s.V1ClusterRole[]) {
    await rbac.createClusterRole({ body: role });
    const name = role.metadata?.name as string;
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
        subjects: [{ kind: 'User', name: server.plugin.user }],
      },
    });
  }
  await core.createNode({ body: { metadata: { name: NODE } } });
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  for (const pod of ['pod-etcd', 'pod-kdd', 'pod-ptp', 'pod-gate', 'pod-policy']) {
    await core.createNamespacedPod({
      namespace: NAMESPACE,
      body: { metadata: { name: pod, labels: { app: pod } }, spec: { containers: [{ name: 'main', image: 'busybox' }] } },
    });
  }
  return server.plugin.kubeconfig;
}

async function perPod(server: KubeServer, kubeconfig: string) {
  const variants: Variant[] = ['etcd', 'kdd', 'ptp'];
  const confs = Object.fromEntries(variants.map((v) => [v, netconf(v, kubeconfig)])) as Record<Variant, string>;
  const samples = addDelSamples(variants);
  let n = 0;
  const cycle = async (variant: Variant): Promise<[number, number]> => {
    const container = `bench-${variant}-${n++}`;
    const add = await run(variant, 'ADD', container, `pod-${variant}`, confs[variant]);
    return [add, await run(variant, 'DEL', container, `pod-${variant}`, confs[variant])];
  };
  for (let i = 0; i < WARMUP; i++) for (const v of variants) await cycle(v);
  // Requests: the API server's counter around 10 ADDs and 10 DELs of each netplug variant.
  const requests: Record<string, { add: number; del: number }> = {};
  for (const variant of ['etcd', 'kdd'] as const) {
    let add = 0;
    let del = 0;
    for (let i = 0; i < 10; i++) {
      const container = `bench-requests-${variant}-${i}`;
      const before = await apiRequests(server);
      await run(variant, 'ADD', container, `pod-${variant}`, confs[variant]);
      const afterAdd = await apiRequests(server);
      await run(variant, 'DEL', container, `pod-${variant}`, confs[variant]);
      const afterDel = await apiRequests(server);
      // Reading /metrics is not itself counted (a non-resource request).
      add += afterAdd - before;
      del += afterDel - afterAdd;
    }
    requests[variant] = { add: add / 10, del: del / 10 };
  }
  for (let i = 0; i < CYCLES; i++) {
    // Rotate which goes first, so that none always follows another's veth deletion.
    for (const v of [...variants.slice(i % 3), ...variants.slice(0, i % 3)]) {
      const [add, del] = await cycle(v);
      samples[v].add.push(add);
      samples[v].del.push(del);
    }
  }
  return { samples, requests };
}

/** ADDs behind a gate that turns ready 1 s after each ADD starts, against the same ADDs without a gate. */
async function readinessGate(kubeconfig: string) {
  let readyAt = Number.POSITIVE_INFINITY;
  const server = createServer((_, response) => {
    response.statusCode = Date.now() >= readyAt ? 200 : 503;
    response.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const gated = netconf('etcd', kubeconfig, { readiness_gates: [`http://127.0.0.1:${port}/ready`] });
  const plain = netconf('etcd', kubeconfig);
  const samples = { gated: [] as number[], plain: [] as number[] };
  try {
    for (let i = 0; i < WAIT_ROUNDS; i++) {
      for (const [kind, conf] of [
        ['gated', gated],
        ['plain', plain],
      ] as const) {
        const container = `bench-gate-${kind}-${i}`;
        readyAt = Date.now() + 1000;
        samples[kind].push(await run('etcd', 'ADD', container, 'pod-gate', conf));
        await run('etcd', 'DEL', container, 'pod-gate', conf);
      }
    }
  } finally {
    server.close();
  }
  return samples;
}

/** ADDs waiting for the policy agent's status file: written 300 ms after the ADD starts, or never. */
async function policyWait(kubeconfig: string) {
  mkdirSync(statusDir, { recursive: true });
  const file = join(statusDir, statusFileName('k8s', NAMESPACE, 'pod-policy', 'eth0'));
  const waiting = netconf('etcd', kubeconfig, { policy_setup_timeout_seconds: 5, endpoint_status_dir: statusDir });
  const timingOut = netconf('etcd', kubeconfig, { policy_setup_timeout_seconds: 2, endpoint_status_dir: statusDir });
  const samples = { written: [] as number[], never: [] as number[] };
  for (let i = 0; i < WAIT_ROUNDS; i++) {
    const container = `bench-policy-${i}`;
    const writer = setTimeout(() => writeFileSync(file, '{}'), 300);
    samples.written.push(await run('etcd', 'ADD', container, 'pod-policy', waiting));
    clearTimeout(writer);
    await run('etcd', 'DEL', container, 'pod-policy', waiting);
    rmSync(file, { force: true });
    if (i < 3) {
      samples.never.push(await run('etcd', 'ADD', `${container}-never`, 'pod-policy', timingOut));
      await run('etcd', 'DEL', `${container}-never`, 'pod-policy', timingOut);
    }
  }
  return samples;
}

/** BURST assignments started at once on one node, timed until the last returns; released between rounds (not timed). */
async function burst(kubeconfig: string) {
  const confs = {
    etcd: {
      cniVersion: '1.0.0',
      name: 'burst-etcd',
      type: 'netplug',
      nodename: NODE,
      etcd_endpoints: etcd?.endpoints,
      ipam: { type: 'netplug-ipam' },
    },
    kdd: {
      cniVersion: '1.0.0',
      name: 'burst-kdd',
      type: 'netplug',
      nodename: NODE,
      datastore_type: 'kubernetes',
      kubernetes: { kubeconfig },
      ipam: { type: 'netplug-ipam' },
    },
    ptp: {
      cniVersion: '1.0.0',
      name: 'burst-hl',
      type: 'ptp',
      ipam: { type: 'host-local', dataDir: join(scratch, 'burst-host-local'), ranges: [[{ subnet: '10.244.0.0/16' }]] },
    },
  };
  const one = (variant: Variant, command: string, container: string) =>
    runChecked(
      `${variant} IPAM`,
      variant === 'ptp' ? HOST_LOCAL : NETPLUG_IPAM,
      runtimeEnv(command, container, netns as string, CNI_PATH),
      JSON.stringify(confs[variant]),
    );
  const samples: Record<Variant, number[]> = { etcd: [], kdd: [], ptp: [] };
  for (let round = 0; round < BURST_ROUNDS; round++) {
    for (const variant of ['etcd', 'kdd', 'ptp'] as const) {
      const ids = Array.from({ length: BURST }, (_, i) => `burst-${variant}-${round}-${i}`);
      const start = process.hrtime.bigint();
      await Promise.all(ids.map((id) => one(variant, 'ADD', id)));
      samples[variant].push(elapsedMs(start));
      await Promise.all(ids.map((id) => one(variant, 'DEL', id)));
    }
  }
  return samples;
}

const lockExisted = existsSync(IPAM_LOCK_FILE);
const lockDirExisted = existsSync(dirname(IPAM_LOCK_FILE));

async function cleanup(): Promise<void> {
  await stopNativeRuns();
  if (netns) spawnSync('ip', ['netns', 'del', netns]);
  if (!lockExisted) rmSync(IPAM_LOCK_FILE, { force: true });
  if (!lockDirExisted) rmSync(dirname(IPAM_LOCK_FILE), { recursive: true, force: true });
  await kube?.stop();
  await etcd?.stop();
  rmSync(scratch, { recursive: true, force: true });
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root: ADD creates interfaces in namespaces');
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  kube = await launchKubeApiserver(join(scratch, 'kube'));
  etcd = await launchEtcd(join(scratch, 'etcd'));
  const kubeconfig = await setUpCluster(kube);
  execFileSync(NETPLUGCTL, ['pool', 'create', 'bench', '--cidr', '10.246.0.0/16'], { env: { ETCD_ENDPOINTS: etcd.endpoints } });
  execFileSync(NETPLUGCTL, ['--kubeconfig', kube.admin.kubeconfig, 'pool', 'create', 'bench', '--cidr', '10.247.0.0/16']);
  netns = `npbench-k8s-${process.pid}`;
  execFileSync('ip', ['netns', 'add', netns]);

  const { samples, requests } = await perPod(kube, kubeconfig);
  const gate = await readinessGate(kubeconfig);
  const policy = await policyWait(kubeconfig);
  const bursts = await burst(kubeconfig);

  const variants: Variant[] = ['etcd', 'kdd', 'ptp'];
  const series: Series[] = [
    ...variants.map((v) => ({
      group: 'ADD + DEL of one pod',
      label: LABELS[v],
      samplesMs: samples[v].add.map((ms, i) => ms + (samples[v].del[i] ?? 0)),
    })),
    ...variants.map((v) => ({ group: 'ADD', label: LABELS[v], samplesMs: samples[v].add })),
    ...variants.map((v) => ({ group: 'DEL', label: LABELS[v], samplesMs: samples[v].del })),
    { group: 'ADD behind a readiness gate ready 1 s after the ADD starts', label: 'with the gate', samplesMs: gate.gated },
    { group: 'ADD behind a readiness gate ready 1 s after the ADD starts', label: 'same ADD, no gate', samplesMs: gate.plain },
    { group: 'ADD with the policy wait', label: 'status file written 300 ms after the ADD starts', samplesMs: policy.written },
    { group: 'ADD with the policy wait', label: 'status file never written (timeout 2 s)', samplesMs: policy.never },
    ...variants.map((v) => ({
      group: `burst of ${BURST} IPAM ADDs on one node`,
      label: v === 'ptp' ? 'host-local' : `netplug-ipam, ${v === 'etcd' ? 'etcd' : 'Kubernetes datastore'}`,
      samplesMs: bursts[v],
    })),
  ];
  const median = (group: string, label: string) => medianOf(series, group, label);
  const ptp = LABELS.ptp;
  const table = writeReport({
    name: 'k8s',
    title: 'netplug in Kubernetes mode: per-pod latency, API requests, readiness gates, policy wait',
    series,
    ratios: [
      {
        label: 'Kubernetes mode on etcd / ptp + host-local, ADD + DEL median',
        value: median('ADD + DEL of one pod', LABELS.etcd) / median('ADD + DEL of one pod', ptp),
      },
      {
        label: 'Kubernetes datastore / ptp + host-local, ADD + DEL median',
        value: median('ADD + DEL of one pod', LABELS.kdd) / median('ADD + DEL of one pod', ptp),
      },
      { label: 'Kubernetes datastore / etcd, ADD median', value: median('ADD', LABELS.kdd) / median('ADD', LABELS.etcd) },
      { label: 'API requests per ADD, netplug-ipam on etcd', value: requests['etcd']?.add ?? NaN },
      { label: 'API requests per DEL, netplug-ipam on etcd', value: requests['etcd']?.del ?? NaN },
      { label: 'API requests per ADD, Kubernetes datastore', value: requests['kdd']?.add ?? NaN },
      { label: 'API requests per DEL, Kubernetes datastore', value: requests['kdd']?.del ?? NaN },
      {
        label: `Kubernetes datastore / etcd, burst of ${BURST} median`,
        value:
          median(`burst of ${BURST} IPAM ADDs on one node`, 'netplug-ipam, Kubernetes datastore') /
          median(`burst of ${BURST} IPAM ADDs on one node`, 'netplug-ipam, etcd'),
      },
      {
        label: `Kubernetes datastore / host-local, burst of ${BURST} median`,
        value:
          median(`burst of ${BURST} IPAM ADDs on one node`, 'netplug-ipam, Kubernetes datastore') /
          median(`burst of ${BURST} IPAM ADDs on one node`, 'host-local'),
      },
      {
        label: 'gated ADD − ungated ADD, medians (s; the gate turns ready at 1 s)',
        value:
          (median('ADD behind a readiness gate ready 1 s after the ADD starts', 'with the gate') -
            median('ADD behind a readiness gate ready 1 s after the ADD starts', 'same ADD, no gate')) /
          1000,
      },
      {
        label: 'policy wait: ADD return after the status file appeared, median (s)',
        value: (median('ADD with the policy wait', 'status file written 300 ms after the ADD starts') - 300) / 1000,
      },
      {
        label: 'policy wait: ADD return with no status file, median (s; timeout 2 s)',
        value: median('ADD with the policy wait', 'status file never written (timeout 2 s)') / 1000,
      },
    ],
    notes: [
      'A real kube-apiserver (built from the Go module proxy, scripts/kube-apiserver.sh) with its own etcd on loopback; the plugin runs as an identity bound to the shipped ClusterRoles (deploy/rbac/netplug-cni.yaml); the CRDs from deploy/crds/.',
      `Per pod: ${CYCLES} ADD + DEL cycles per variant into one namespace, IPv4, each a fresh process spawned as a container runtime spawns it (Rust's posix_spawn, crates/netplug-shim/examples/exec-server.rs; not Node's spawn, ~3 ms dearer per process) and timed natively from spawn to exit, the variants rotated pod by pod. The netplug variants read the pod and its namespace (policy.type k8s) and write a workload endpoint; ptp reads no API and writes no endpoint.`,
      "API requests: the growth of the API server's apiserver_request_total across one ADD and one DEL (10 of each, averaged); the API server's own background requests may add a fraction. The etcd variant's datastore round trips go to etcd and are not counted here (see ipam.md).",
      `Readiness gate: a local HTTP server answering 503 until 1 s after the ADD is spawned, then 200; the first probe is immediate, then every 200 ms. ${WAIT_ROUNDS} rounds, against the same ADD without a gate.`,
      `Burst: ${BURST} IPAM executables (netplug-ipam, or host-local) spawned at once for one node, timed until the last exits; ${BURST_ROUNDS} rounds each, released between rounds. On the Kubernetes datastore the processes take turns under the host-wide IPAM lock (flock); on etcd a loser is served by the next winner's transaction.`,
      `Policy wait: the status file appears 300 ms after the ADD is spawned; the plugin watches the directory (100 ms polling as fallback). ${WAIT_ROUNDS} rounds; 3 rounds with no file and policy_setup_timeout_seconds 2.`,
    ],
  });
  console.log(table);
  console.log('\nwrote bench/results/k8s.{md,json,svg}');
}

main()
  .catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exitCode = 1;
  })
  .finally(cleanup);
