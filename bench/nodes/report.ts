// bench/nodes.ts's report: its series (throughput and round trips per mode, pod to pod and node to
// node; the Deployment's time per pod network), the ratios of medians against the targets, the
// notes on how each was taken; bench/results/nodes.{md,json,svg}, and the three headline ratios
// printed last. Its own table rather than bench/lib/report.ts's, whose columns are milliseconds.
import { cpus } from 'node:os';

import { writeUnitReport, type UnitSeries } from '../lib/unit-report.ts';
import { totalRequests } from '../lib/api-requests.ts';
import { describeCpu } from '../lib/cpu-usage.ts';
import { summarize } from '../lib/stats.ts';
import type { Cni } from './clusters.ts';
import type { Deployed } from './deployment.ts';
import { DEPLOY_ROUNDS, IPERF_SECONDS, PINGS, REPLICAS, TRAFFIC_ROUNDS } from './settings.ts';
import { MODES, PATHS, type Mode, type ModeFacts, type Path, type Round } from './traffic.ts';

export interface NodesResults {
  traffic: { facts: ModeFacts[]; rounds: Round[] };
  deployments: Record<Cni, Deployed[]>;
  /** The load average (1 min) when the run started, and the run's length in seconds. */
  loadBefore: number;
  runSeconds: number;
}

const MODE_TITLE: Record<Mode, string> = {
  direct: 'no encapsulation (vxlanMode Never)',
  vxlan: 'VXLAN (vxlanMode Always)',
};
const PATH_LABEL: Record<Path, string> = { pod: 'pod to pod', node: 'node to node' };
const CNI_LABEL: Record<Cni, string> = { netplug: 'netplug (Kubernetes datastore, fast path)', ptp: 'ptp + host-local' };

const median = (samples: readonly number[]) => summarize(samples).medianMs;

/** The requests' total, then those on netplug's resources (its CRDs' groups), ten or more of a kind by name. */
function describeRequests(requests: [string, number][]): string {
  const ours = requests.filter(([key]) => /^\S+ (crd\.)?projectnet\.org\//.test(key));
  // The few requests of start-up's watches and lists would drown the per-pod ones.
  const shown = ours.filter(([, n]) => n >= 10);
  const rest = totalRequests(ours) - totalRequests(shown);
  const listed = [...shown.map(([key, n]) => `${key} ${n}`), ...(rest > 0 ? [`${rest} others`] : [])].join(', ');
  return `${totalRequests(requests)} (on netplug's resources: ${listed || 'none'})`;
}

export function report(results: NodesResults): void {
  const { traffic, deployments } = results;
  const of = (mode: Mode, path: Path) => traffic.rounds.filter((r) => r.mode === mode && r.path === path);
  const throughputGroup = (mode: Mode) => `TCP throughput node 1 → node 2, ${MODE_TITLE[mode]}`;
  const rttGroup = (mode: Mode) => `round trip node 1 → node 2, ${MODE_TITLE[mode]}`;
  const deployGroup = `${REPLICAS}-replica Deployment over three nodes to all Running`;
  const series: UnitSeries[] = [
    ...MODES.flatMap((mode) => [
      ...PATHS.map((path) => ({
        group: throughputGroup(mode),
        unit: 'Gbit/s',
        label: PATH_LABEL[path],
        samples: of(mode, path).map((r) => r.bitsPerSecond / 1e9),
      })),
      ...PATHS.map((path) => ({
        group: rttGroup(mode),
        unit: 'ms',
        label: PATH_LABEL[path],
        samples: of(mode, path).flatMap((r) => r.rttMs),
      })),
    ]),
    ...(['netplug', 'ptp'] as const).map((cni) => ({
      group: deployGroup,
      unit: 's',
      label: CNI_LABEL[cni],
      samples: deployments[cni].map((d) => d.seconds),
    })),
  ];
  const medianOf = (group: string, label: string) => median(series.find((s) => s.group === group && s.label === label)?.samples ?? []);
  const podOverNode = (group: string) => medianOf(group, PATH_LABEL.pod) / medianOf(group, PATH_LABEL.node);
  const directRatio = podOverNode(throughputGroup('direct'));
  const vxlanRatio = podOverNode(throughputGroup('vxlan'));
  const deployRatio = medianOf(deployGroup, CNI_LABEL.netplug) / medianOf(deployGroup, CNI_LABEL.ptp);
  const retransmits = (mode: Mode, path: Path) => median(of(mode, path).map((r) => r.retransmits));
  const lost = (mode: Mode, path: Path) => of(mode, path).reduce((sum, r) => sum + r.lost, 0);
  const figures = [
    { label: 'no encapsulation: TCP throughput pod to pod / node to node, median (target ≥ 0.9)', value: directRatio },
    { label: 'VXLAN: TCP throughput pod to pod / node to node, median (target ≥ 0.7)', value: vxlanRatio },
    { label: 'no encapsulation: round trip pod to pod / node to node, median', value: podOverNode(rttGroup('direct')) },
    { label: 'VXLAN: round trip pod to pod / node to node, median', value: podOverNode(rttGroup('vxlan')) },
    { label: `${REPLICAS}-replica Deployment over three nodes: netplug / ptp + host-local, median (target ≤ 1.0)`, value: deployRatio },
  ];
  const describeDeployed = (cni: Cni) =>
    deployments[cni].map(
      (d, i) =>
        `${CNI_LABEL[cni]}, round ${i + 1}: ${d.seconds.toFixed(1)} s, replicas by node ${Object.values(d.perNode).join(' / ')}; CPU: ${describeCpu(d.cpu)}; API requests: ${describeRequests(d.apiRequests)}`,
    );
  const notes = [
    "One machine, three nodes (scripts/lib/cluster.ts, startCluster({ nodes: 3 })): each node a network namespace and mount namespace of its own with its own containerd, kubelet and kube-proxy (node 1 also runs etcd and the control plane), built from the Go module proxy; nodes 1 and 2 on subnet A (10.250.0.0/24), node 3 on subnet B behind a router namespace, each node's eth0 a veth on the router's bridge for its subnet.",
    `Traffic: netplug installed from deploy/manifests/netplug.yaml (Kubernetes datastore) as test/e2e/multi-node.ts installs it, on the first netplug cluster of the Deployment part, after its Deployment was deleted. From node 1 to node 2 (one subnet, one bridge between them). Per mode, the default pool switched with netplugctl pool update default-ipv4-ippool --vxlan-mode (Never, then Always), both nodes' MTU files waited for, then a busybox pod made on each node (they take the MTU then); the pods' eth0 MTU and node 1's route to the server pod checked (below). Debian's iperf3 and ping run in the pods' network namespaces (nsenter --net to the container's, the pid from the node's containerd) and in the nodes' for node to node, the same direction. The modes run one after the other (a pool has one mode, and the MTU every pod takes follows the largest encapsulation of any pool), each against node to node in the same rounds.`,
    `Each mode: a warm-up of each path (iperf3 2 s, 10 pings), then ${TRAFFIC_ROUNDS} rounds alternating pod to pod and node to node (pod first in even rounds, node first in odd ones); a round of a path is iperf3, one TCP stream, ${IPERF_SECONDS} s after one second omitted (slow start; the figure is what the server received), then ${PINGS} echo requests 20 ms apart (each reply's round trip a sample; the whisker's p99 is of ${TRAFFIC_ROUNDS * PINGS} samples).`,
    ...traffic.facts.map(
      (f) =>
        `${MODE_TITLE[f.mode]}: MTU files on nodes 1 and 2 ${f.mtu.nodes.join(' / ')}, the pods' eth0 ${f.mtu.pods.join(' / ')}; node 1's route to the server pod: \`${f.route}\`; iperf3 retransmits per round, median: pod to pod ${retransmits(f.mode, 'pod')}, node to node ${retransmits(f.mode, 'node')}; echo requests unanswered: pod to pod ${lost(f.mode, 'pod')}, node to node ${lost(f.mode, 'node')}.`,
    ),
    `Deployment: ${REPLICAS} replicas of busybox (sleep, the image never pulled) with a topology spread constraint (maxSkew 1 over kubernetes.io/hostname, DoNotSchedule), timed from kubectl create of the Deployment until ${REPLICAS} replicas are Running with a pod IP (polled each second), every Node Ready before. ${DEPLOY_ROUNDS} round(s) per variant, each on a fresh three-node cluster, the variants' order alternated per round. netplug: deploy/manifests/netplug.yaml (Kubernetes datastore, fast path on: the default, its default pool VXLAN CrossSubnet). ptp + host-local: Debian's reference plugins, one conflist per node, host-local's range that Node's spec.podCIDR (kube-controller-manager allocates one per node); no routes between nodes, which the timing does not need (pods Running with an address, not reaching each other).`,
    "CPU seconds spent meanwhile, by program (/proc, children counted in the parent that waited for them: containerd includes the CNI plugins, containerd-shim the pods' processes; every process on the machine, the three nodes' together and whatever else ran meanwhile), and the requests the API server handled meanwhile (apiserver_request_total, read before the clock starts and after it stops; netplug's own are its IPAM objects and workload endpoints on the Kubernetes datastore):",
    ...describeDeployed('netplug'),
    ...describeDeployed('ptp'),
    `The machine has ${cpus().length} cores (load average ${results.loadBefore.toFixed(2)} at the start), shared by the three nodes, the control plane, iperf3 at both ends and the kernel's packet path of both nodes: throughput is bound by CPU, node to node as pod to pod, and every figure carries noise. The run took ${(results.runSeconds / 60).toFixed(1)} min.`,
  ];

  const title = 'Across nodes: pod-to-pod throughput and round trips per mode, a Deployment over three nodes';
  const printed = writeUnitReport({
    name: 'nodes',
    title,
    series,
    ratios: figures,
    notes,
    loadBefore: results.loadBefore,
    details: { traffic, deployments },
  });
  console.log(printed);
  console.log('\nwrote bench/results/nodes.{md,json,svg}\n');
  console.log(`direct throughput ratio: ${directRatio.toFixed(2)}`);
  console.log(`vxlan throughput ratio: ${vxlanRatio.toFixed(2)}`);
  console.log(`three-node deployment ratio: ${deployRatio.toFixed(2)}`);
}
