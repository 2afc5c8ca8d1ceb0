// bench/flows.ts's report: its series (throughput, connection rate, the agent's CPU per 1,000 new
// flows a second, each with flow logs on and off), the ratios against the targets, the notes on
// how each was taken; bench/results/flows.{md,json,svg}, and the headline figures printed last.
// Its own table rather than bench/lib/report.ts's, whose columns are milliseconds.
import { cpus } from 'node:os';

import { writeUnitReport, type UnitSeries } from '../lib/unit-report.ts';
import { summarize } from '../lib/stats.ts';
import type { ConnRound, Recorded, ThroughputRound } from './rounds.ts';
import {
  CONCURRENCY,
  CONN_ROUNDS,
  CONN_SECONDS,
  INTERVAL_SECONDS,
  NAMESPACE,
  POLICY,
  THROUGHPUT_ROUNDS,
  THROUGHPUT_SECONDS,
  VARIANTS,
  type Variant,
} from './settings.ts';

const LABEL: Record<Variant, string> = { on: 'flow logs on', off: 'flow logs off' };

export interface FlowsResults {
  throughput: ThroughputRound[];
  conns: ConnRound[];
  recorded: Recorded;
  /** The load average (1 min) when the run started. */
  loadBefore: number;
}

const median = (samples: readonly number[]) => summarize(samples).medianMs;
/** Millicores per 1,000 new flows a second: CPU seconds per flow × 10⁶. */
const perThousand = (cpu: number, flows: number) => (cpu / flows) * 1e6;

export function report(results: FlowsResults): void {
  const { throughput, conns, recorded } = results;
  const of = <R extends { variant: Variant }>(rounds: R[], variant: Variant, value: (round: R) => number) =>
    rounds.filter((r) => r.variant === variant).map(value);
  const series: UnitSeries[] = [
    ...VARIANTS.map((variant) => ({
      group: 'TCP throughput pod to pod, iperf3',
      unit: 'Gbit/s',
      label: LABEL[variant],
      samples: of(throughput, variant, (r) => r.bitsPerSecond / 1e9),
    })),
    ...VARIANTS.map((variant) => ({
      group: `new TCP connections pod to pod, ${CONCURRENCY} at a time`,
      unit: 'per s',
      label: LABEL[variant],
      samples: of(conns, variant, (r) => r.rate),
    })),
    ...VARIANTS.map((variant) => ({
      group: "netplug-node's CPU per 1,000 new flows a second",
      unit: 'millicores',
      label: LABEL[variant],
      samples: of(conns, variant, (r) => perThousand(r.agentCpu, r.completed)),
    })),
  ];
  const ratio = (group: number) => median(series[group * 2]?.samples ?? []) / median(series[group * 2 + 1]?.samples ?? []);
  const throughputRatio = ratio(0);
  const connRatio = ratio(1);
  const cpuOn = median(series[4]?.samples ?? []);
  const onConns = conns.filter((r) => r.variant === 'on');
  const figures = [
    { label: 'TCP throughput, flow logs on / off, median (target ≥ 0.95)', value: throughputRatio },
    { label: 'new connections per second, flow logs on / off, median (target ≥ 0.95)', value: connRatio },
    { label: "netplug-node's CPU per 1,000 new flows a second with flow logs on, median (millicores)", value: cpuOn },
    {
      label: "netplug-node's CPU per 1,000 new flows a second with flow logs off, median (millicores)",
      value: median(series[5]?.samples ?? []),
    },
    {
      label:
        "netplug-flows' CPU per 1,000 new flows a second, the rounds with flow logs on, median (millicores; on this machine, not the node, in a cluster)",
      value: median(onConns.map((r) => perThousand(r.aggregatorCpu, r.completed))),
    },
    {
      label: "iperf3's retransmits per round, flow logs on, median",
      value: median(of(throughput, 'on', (r) => r.retransmits)),
    },
    {
      label: "iperf3's retransmits per round, flow logs off, median",
      value: median(of(throughput, 'off', (r) => r.retransmits)),
    },
    {
      label: `flows recorded by the server's end / connections the client opened (${recorded.opened})`,
      value: recorded.atServer / recorded.opened,
    },
    {
      label: `flows recorded by the client's end / connections the client opened (${recorded.opened})`,
      value: recorded.atClient / recorded.opened,
    },
    { label: `flow records dropped by the agent (of ${recorded.sent + recorded.dropped})`, value: recorded.dropped },
    {
      label:
        "connection tracking's events lost to the agent's full socket (each such connection is counted by a dump if still open, else not)",
      value: recorded.overruns,
    },
  ];
  const notes = [
    `A real kube-apiserver with its etcd on loopback (the Kubernetes datastore); two nodes, each a network namespace reaching it through a relay (test/helpers/nodes.ts), each running the built dist/bin/netplug-node with NETPLUG_POLICY_ENFORCEMENT=true and NETPLUG_NETWORKING_BACKEND=none, one of them with NETPLUG_FLOW_LOGS=true (interval ${INTERVAL_SECONDS} s${INTERVAL_SECONDS === 15 ? ', the default' : ''}) posting to the built netplug-flows on the host's loopback with a ServiceAccount token for audience netplug-flows (checked by TokenReview).`,
    `On each node a server pod and a client pod, network namespaces plugged in as the plugin plugs them (a veth with the workload prefix, proxy ARP, the address routed), with their Pod objects; NetworkPolicy ${NAMESPACE}/${POLICY} selects both servers and allows ingress from the client pods on the two ports used. So every new connection is decided twice on its node, by the client's profile (egress) and by the policy (ingress), and with flow logs both deciding rules write their numbers into the connection's conntrack mark, which the agent's flow tracker (the addon) reads back from the events of the connections that end and a dump at each interval's end; connection tracking counts bytes and packets (nf_conntrack_acct) on that node only.`,
    `Rounds alternate flow logs on and off (on, off, then off, on, ...), one warm-up each first. Throughput: ${THROUGHPUT_ROUNDS} rounds each of Debian's iperf3 from the client to the server's iperf3, one TCP stream, ${THROUGHPUT_SECONDS} s after one second omitted (slow start); the figure is what the server received.`,
    `Connection rate: ${CONN_ROUNDS} rounds each of ${CONN_SECONDS} s of bench/flows-connect.ts in the client pod: new TCP connections to a Node listener in the server pod, ${CONCURRENCY} at a time, each closed by the client once it connects and counted once closed at both ends (the client pod reuses ports in TIME_WAIT: tcp_tw_reuse=1, ports 1024-65535). After a round with flow logs the bench waits (untimed) until the agent has sent the records of an interval ending at least a second after the round (up to ${INTERVAL_SECONDS} s more; it reads the agent's /metrics once a second meanwhile, each read costing the agent CPU the figure below counts), after one with flow logs off 2 s; then it deletes the round's connections from that node's connection tracking (conntrack -D), so that no round's leftovers (the agent's next dump of them) fall into the next.`,
    "The agent's CPU: user + system from /proc/<pid>/stat, from the round's start until the wait after it, divided by the round's connections and scaled to 1,000 a second (CPU seconds per 1,000 flows = cores per 1,000 flows a second; shown in millicores). With flow logs on it holds reading the events of ended connections, the conntrack dump at the interval's end, the records and the POST; the idle agent's own work over the wait is in both variants. netplug-flows ran on the same machine and took its share of the CPU during the rounds with flow logs on; in a cluster it runs on one node for all of them.",
    `The connection tracking table the agent's dump reads holds the round's connections only: ${median(onConns.map((r) => r.tracked)).toFixed(0)} entries at a round's end with flow logs on (the median deleted), as the client's ports go round within a round and a reused port's entry in TIME_WAIT gives way to a new connection (the old entry's event tells its end, the new one is a new flow). On a node with many peers, where TIME_WAIT's 120 s keep more entries, each interval's dump reads more.`,
    `Checked at the end: the aggregator's records of the node (Allow) summed by their flows, against the connections the client on that node opened in the whole run (iperf3's control connection and stream, the checks, the rounds): ${recorded.atServer} at the server's end, ${recorded.atClient} at the client's, of ${recorded.opened} (and ${recorded.deniedTries} attempts to a port the policy denies while the bench waited for it, which the client's profile allowed and the server's policy denied on the same node: such a connection never enters connection tracking, so only the server's end records it, as denied); the server's end recorded ${recorded.policies.join(', ') || 'no policy'} as deciding.`,
    `The machine has ${cpus().length} cores, shared during the run with whatever else ran (load average ${results.loadBefore.toFixed(2)} at the start): the client, the listener, iperf3, both agents, netplug-flows and the kernel's packet path all compete for them, so the connection rate and throughput are bound by CPU and every ratio carries noise. The chart's whisker is the highest round (p99 of fewer than 100 samples).`,
  ];

  const title = 'Flow logs on netplug-node: pod-to-pod throughput, new connections per second, CPU';
  const printed = writeUnitReport({
    name: 'flows',
    title,
    series,
    ratios: figures,
    notes,
    loadBefore: results.loadBefore,
    details: { rounds: { throughput, connections: conns }, recorded },
  });
  console.log(printed);
  console.log('\nwrote bench/results/flows.{md,json,svg}\n');
  console.log(`flows agent CPU per 1000 new flows/s (millicores): ${cpuOn.toFixed(1)}`);
  console.log(`flows throughput ratio: ${throughputRatio.toFixed(2)}`);
  console.log(`flows conn rate ratio: ${connRatio.toFixed(2)}`);
}
