// npm run bench:agent, first part: a 100-replica Deployment under the real kubelet (containerd,
// kube-controller-manager, scheduler; scripts/lib/cluster.ts), timed from `kubectl create` until
// every replica is Running with an address, with netplug installed from its manifest (fast path
// on) on the etcd and on the Kubernetes datastore, against Debian's ptp + host-local in the same
// run. Each variant gets a fresh cluster per round; the variants are rotated round by round.
// Writes bench/results/agent-kubelet.{md,json,svg}.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { startCluster, type Cluster } from '../scripts/lib/cluster.ts';
import { getJson, ptpConflist } from '../test/helpers/cluster.ts';
import { eventually, imageArchive, manifestFor, nodePaths, writeKubeadmConfig } from '../test/e2e/install.ts';
import { describeCpu, trackCpu, type CpuSeconds } from './lib/cpu-usage.ts';
import { benchDeploymentFile } from './lib/deployment.ts';
import { medianOf, writeReport, type Series } from './lib/report.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const REPLICAS = 100;
const ROUNDS = Number(process.env['BENCH_KUBELET_ROUNDS'] ?? 2);

type Variant = 'ptp' | 'etcd' | 'kdd';
const LABELS: Record<Variant, string> = {
  ptp: 'ptp + host-local',
  etcd: 'netplug on etcd (fast path)',
  kdd: 'netplug on the Kubernetes datastore (fast path)',
};
const VARIANTS: Variant[] = ['ptp', 'etcd', 'kdd'];

let current: Cluster | undefined;

async function installPtp(c: Cluster): Promise<void> {
  const podCidr: string = (await getJson(c, 'node', c.nodeName)).spec.podCIDR;
  const conflist = ptpConflist('bench-ptp', podCidr, join(c.dir, 'host-local'));

  writeFileSync(join(c.cniConfDir, '10-ptp.conflist'), JSON.stringify(conflist));
}

async function installNetplug(c: Cluster, variant: 'etcd' | 'kdd'): Promise<void> {
  await c.importImage(imageArchive());
  await writeKubeadmConfig(c);
  const file = variant === 'kdd' ? 'netplug.yaml' : 'netplug-etcd.yaml';
  const data: Record<string, string> = variant === 'etcd' ? { etcd_endpoints: `http://${c.nodeIp}:2379` } : {};
  const manifest = manifestFor(c, file, nodePaths(c), data);
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
  await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
  await eventually(
    'netplug-node and netplug-kube-controllers ready',
    async () => {
      const pods = (await getJson(c, 'pods', '-A', '-l', 'k8s-app in (netplug-node,netplug-kube-controllers)')).items as any[];
      const ready = pods.filter((p) => p.status.containerStatuses?.every((s: any) => s.ready));
      return ready.length >= 2 || undefined;
    },
    300,
  );
}

/** Seconds from `kubectl create` to every replica Running with an address, and the CPU spent meanwhile. */
async function deploy(c: Cluster): Promise<{ seconds: number; cpu: CpuSeconds }> {
  const cpu = await trackCpu();
  const started = process.hrtime.bigint();
  // Created whole, as one object: `kubectl create deployment` then a patch of the template would
  // roll out a second ReplicaSet, and every pod of the first would be added and deleted too.
  await c.kubectl('create', '-f', benchDeploymentFile(c, REPLICAS));
  await eventually(
    `${REPLICAS} replicas Running`,
    async () => {
      const pods = (await getJson(c, 'pods', '-l', 'app=bench')).items as any[];
      const running = pods.filter((p) => p.status.phase === 'Running' && p.status.podIP && !p.metadata.deletionTimestamp);
      return running.length >= REPLICAS || undefined;
    },
    600,
  );
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9, cpu: await cpu.stop() };
}

/** The agent's own account (its /metrics): the ADDs and DELs it served, the ADDs' mean and median bucket, and where their pods came from. */
async function agentAdds(c: Cluster): Promise<string> {
  const metrics = await c.inNode('curl', ['-s', '-m', '5', 'http://127.0.0.1:9099/metrics']).catch(() => '');
  const value = (name: string, labels: string) =>
    Number(new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'm').exec(metrics)?.[1] ?? Number.NaN);
  const labels = 'command="ADD",result="success"';
  const count = value('netplug_cni_request_duration_seconds_count', labels);
  const sum = value('netplug_cni_request_duration_seconds_sum', labels);
  const buckets = [
    ...metrics.matchAll(/^netplug_cni_request_duration_seconds_bucket\{le="([^"]+)",command="ADD",result="success"\} (\S+)$/gm),
  ];
  const median = buckets.find(([, , n]) => Number(n) >= count / 2)?.[1];
  const dels = value('netplug_cni_request_duration_seconds_count', 'command="DEL",result="success"');
  const reads = (from: string) => {
    const n = value('netplug_pod_reads_total', `from="${from}"`);
    return Number.isNaN(n) ? 0 : n;
  };
  return `netplug-node served ${count} ADDs and ${Number.isNaN(dels) ? 0 : dels} DELs; its ADDs took a mean ${((sum / count) * 1000).toFixed(1)} ms, median ≤ ${Number(median) * 1000} ms; pods from its watch ${reads('watch')}, read from the API ${reads('api')}`;
}

async function measure(variant: Variant): Promise<{ seconds: number; cpu: CpuSeconds; agent?: string }> {
  current = await startCluster({ systemPlugins: variant === 'ptp' });
  try {
    if (variant === 'ptp') await installPtp(current);
    else await installNetplug(current, variant);
    const measured = await deploy(current);
    return variant === 'ptp' ? measured : { ...measured, agent: await agentAdds(current) };
  } finally {
    await current.stop();
    current = undefined;
  }
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root: the cluster runs a kubelet and containerd');
  process.once('SIGINT', () => void (current?.stop() ?? Promise.resolve()).finally(() => process.exit(130)));
  const seconds: Record<Variant, number[]> = { ptp: [], etcd: [], kdd: [] };
  const cpu: Record<Variant, CpuSeconds[]> = { ptp: [], etcd: [], kdd: [] };
  const served: Record<Variant, string[]> = { ptp: [], etcd: [], kdd: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < VARIANTS.length; k++) {
      const variant = VARIANTS[(round + k) % VARIANTS.length] as Variant;
      const { seconds: s, cpu: used, agent } = await measure(variant);
      seconds[variant].push(s);
      cpu[variant].push(used);
      if (agent) served[variant].push(agent);
      console.error(
        `round ${round + 1}: ${LABELS[variant]}: ${REPLICAS} replicas Running in ${s.toFixed(1)} s; CPU: ${describeCpu(used)}${agent ? `; ${agent}` : ''}`,
      );
    }
  }
  const group = `${REPLICAS}-replica Deployment to all Running`;
  const series: Series[] = VARIANTS.map((v) => ({ group, label: LABELS[v], samplesMs: seconds[v].map((s) => s * 1000) }));
  const ratio = (v: Variant) => medianOf(series, group, LABELS[v]) / medianOf(series, group, LABELS.ptp);
  const table = writeReport({
    name: 'agent-kubelet',
    title: `A ${REPLICAS}-replica Deployment under the real kubelet: netplug's fast path against ptp + host-local`,
    series,
    ratios: [
      { label: 'netplug on etcd / ptp + host-local, median', value: ratio('etcd') },
      { label: 'netplug on the Kubernetes datastore / ptp + host-local, median', value: ratio('kdd') },
    ],
    notes: [
      'One node: kubelet, containerd, kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy built from the Go module proxy (scripts/lib/cluster.ts), busybox imported locally.',
      `Timed from kubectl create of the Deployment (one object, the image never pulled) until ${REPLICAS} replicas are Running with a pod IP (polled each second). ${ROUNDS} round(s); each variant on a fresh cluster, the order rotated per round.`,
      'netplug installed from deploy/manifests (netplug-etcd.yaml, netplug.yaml) as the README says, fast path on (the default); ptp + host-local as one conflist on the Node pod CIDR.',
      "CPU seconds spent meanwhile, by program, each round (/proc, children counted in the parent that waited for them: containerd includes the CNI plugins, containerd-shim the pods' processes):",
      ...VARIANTS.flatMap((v) => cpu[v].map((used, round) => `${LABELS[v]}, round ${round + 1}: ${describeCpu(used)}`)),
      'As netplug-node counted them (netplug_cni_request_duration_seconds and netplug_pod_reads_total on its /metrics):',
      ...VARIANTS.flatMap((v) => served[v].map((text, round) => `${LABELS[v]}, round ${round + 1}: ${text}`)),
    ],
  });
  console.log(table);
  console.log('\nwrote bench/results/agent-kubelet.{md,json,svg}');
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
