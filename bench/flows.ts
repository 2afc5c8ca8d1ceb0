// npm run bench:flows: what flow logs (NETPLUG_FLOW_LOGS=true) cost pod-to-pod traffic on a node.
// A real kube-apiserver, the built flow-log aggregator netplug-flows, and two nodes (network
// namespaces) each running the built netplug-node enforcing the same NetworkPolicy between a
// client pod and a server pod, one node with flow logs on, one without (bench/flows/setup.ts).
// Rounds alternate between them (bench/flows/rounds.ts):
//   1. TCP throughput: Debian's iperf3, client pod to server pod, bits per second;
//   2. new TCP connections per second (bench/flows-connect.ts in the client pod), and the agent's
//      CPU time over each round, per 1,000 new flows a second.
// Then what reached the aggregator against what the client opened. The figures are the medians'
// ratios, on / off (the target: at least 0.95 for both). Everything (API server, etcd, agents,
// aggregator, namespaces, listeners) goes at the end, on failure and on Ctrl-C too. Writes
// bench/results/flows.{md,json,svg}; prints the throughput and connection-rate ratios last.
// BENCH_FLOWS_CONTROL=1 runs both nodes without flow logs and prints their ratios only: how far
// the rig alone moves them (bench/flows/settings.ts).
// The run's teardowns, scratch copy of the build and the agent's process come from bench/policy/.
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { spawnSync } from 'node:child_process';

import { summarize } from './lib/stats.ts';
import { recorded, connRounds, throughputRounds, type ConnRound, type ThroughputRound } from './flows/rounds.ts';
import { report } from './flows/report.ts';
import { CONTROL } from './flows/settings.ts';
import { log, setUp } from './flows/setup.ts';
import { cleanup, prepareRun } from './policy/session.ts';

async function main(): Promise<void> {
  const loadBefore = loadavg()[0] ?? 0;
  prepareRun();
  if (!existsSync(new URL('../dist/bin/netplug-flows', import.meta.url)))
    throw new Error('dist/bin/netplug-flows is missing: run npm run build');
  for (const tool of ['iperf3', 'conntrack'])
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0)
      throw new Error(`${tool} is missing: sh scripts/ensure-packages.sh iperf3 conntrack`);
  if (CONTROL) log("a control run: flow logs off on both nodes ('on' names the node that has them in a real run)");
  const setup = await setUp();
  const throughput = await throughputRounds(setup);
  const conns = await connRounds(setup);
  if (CONTROL) return controlRatios(throughput, conns);
  const seen = await recorded(setup);
  log(
    `records: ${seen.atServer} flows at the server's end, ${seen.atClient} at the client's, of ${seen.opened} connections opened; ${seen.overruns} events lost`,
  );
  report({ throughput, conns, recorded: seen, loadBefore });
}

/** A control run's ratios, the two nodes alike: what the rig alone moves a ratio by. */
function controlRatios(throughput: ThroughputRound[], conns: ConnRound[]): void {
  const ratio = <R extends { variant: string }>(rounds: R[], value: (round: R) => number) => {
    const median = (variant: string) => summarize(rounds.filter((r) => r.variant === variant).map(value)).medianMs;
    return (median('on') / median('off')).toFixed(2);
  };
  console.log(`control throughput ratio: ${ratio(throughput, (r) => r.bitsPerSecond)}`);
  console.log(`control conn rate ratio: ${ratio(conns, (r) => r.rate)}`);
}

main()
  .catch((err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
