// The rounds of bench/flows.ts: flow logs on and off alternate round by round (on, off, then off,
// on, ...), so that the machine's drift hits both alike. Throughput: iperf3 for THROUGHPUT_SECONDS.
// Connection rate: bench/flows-connect.ts for CONN_SECONDS; after each round the bench waits (not
// timed) until the node with flow logs has sent what the round logged, reading the agents' CPU time
// then, and deletes the round's connections from both nodes' connection tracking, so that neither
// round's work spills into the next.
import { setTimeout as sleep } from 'node:timers/promises';

import { until } from '../policy/session.ts';
import type { FlowRecord } from '../../ts/model/flow.ts';
import {
  CONCURRENCY,
  CONN_ROUNDS,
  CONTROL,
  CONN_SECONDS,
  INTERVAL_SECONDS,
  THROUGHPUT_ROUNDS,
  THROUGHPUT_SECONDS,
  SIDES,
  type Variant,
} from './settings.ts';
import { log, type Setup, type Side } from './setup.ts';
import { clearTracked, connectFor, cpuSecondsOf, deniedTries, iperf, opened, type Iperf } from './traffic.ts';

/** Round i's order: on first in even rounds, off first in odd ones. */
const order = (i: number): readonly Variant[] => (i % 2 === 0 ? ['on', 'off'] : ['off', 'on']);

export type ThroughputRound = Iperf & { variant: Variant };

export async function throughputRounds({ sides }: Setup): Promise<ThroughputRound[]> {
  log(`throughput: iperf3 ${THROUGHPUT_SECONDS} s a round, ${THROUGHPUT_ROUNDS} rounds each (after one warm-up each)`);
  for (const variant of order(0)) await iperf(sides[variant], 2);
  const rounds: ThroughputRound[] = [];
  for (let i = 0; i < THROUGHPUT_ROUNDS; i++)
    for (const variant of order(i)) {
      const result = await iperf(sides[variant], THROUGHPUT_SECONDS);
      rounds.push({ variant, ...result });
      log(`  ${variant}: ${(result.bitsPerSecond / 1e9).toFixed(2)} Gbit/s, ${result.retransmits} retransmits`);
      await sleep(500);
    }
  return rounds;
}

export interface ConnRound {
  variant: Variant;
  /** Connections completed, and failed attempts. */
  completed: number;
  failed: number;
  seconds: number;
  /** completed / seconds */
  rate: number;
  /** The agent's CPU seconds from the round's start until its records were sent (flow logs on) or 2 s after it (off). */
  agentCpu: number;
  /** netplug-flows' CPU seconds over the same span. */
  aggregatorCpu: number;
  /** From the round's start to the agent's CPU read (s). */
  spanSeconds: number;
  /** Entries of the round's connections in the node's connection tracking, deleted after it. */
  tracked: number;
}

/** The /metrics values of `names` (summed over their label sets) on `side`'s agent, from one scrape. */
async function metricsSum(side: Side, names: string[]): Promise<number> {
  const text = (await side.agent.probe.get('/metrics')).text;
  let sum = 0;
  for (const name of names)
    for (const match of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) sum += Number(match[1]);
  return sum;
}

/**
 * The records sent and dropped by the agent with flow logs. One scrape a second while waiting:
 * a scrape costs the agent CPU (its process metrics), which the round's figure would count.
 */
const recordsHandled = (side: Side) => metricsSum(side, ['netplug_flow_records_sent_total', 'netplug_flow_records_dropped_total']);

/**
 * Until the agent with flow logs has handled an interval that ended at least a second after the
 * round: its records sent (or dropped) counted after then.
 */
async function flushed(side: Side): Promise<void> {
  await sleep(1000);
  const before = await recordsHandled(side);
  await until(
    'the flow records of the round sent',
    async () => (await recordsHandled(side)) > before,
    INTERVAL_SECONDS * 1000 + 15_000,
    1000,
  ).catch(async (err: unknown) => {
    const metrics = (await side.agent.probe.get('/metrics')).text.split('\n').filter((line) => /^netplug_flow/.test(line));
    throw new Error(`${err instanceof Error ? err.message : err}\n${metrics.join('\n')}\n${side.agent.logText.slice(-3000)}`);
  });
}

async function connRound({ sides, aggregator }: Setup, variant: Variant): Promise<ConnRound> {
  const side = sides[variant];
  const started = process.hrtime.bigint();
  const agentBefore = side.agent.cpuSeconds();
  const aggregatorBefore = cpuSecondsOf(aggregator.pid);
  const done = await connectFor(side, CONN_SECONDS, CONCURRENCY);
  if (variant === 'on' && !CONTROL) await flushed(side);
  else await sleep(2000);
  const agentCpu = side.agent.cpuSeconds() - agentBefore;
  const aggregatorCpu = cpuSecondsOf(aggregator.pid) - aggregatorBefore;
  const spanSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  const tracked = clearTracked(side);
  return { variant, ...done, rate: done.completed / done.seconds, agentCpu, aggregatorCpu, spanSeconds, tracked };
}

export async function connRounds(setup: Setup): Promise<ConnRound[]> {
  log(`connection rate: ${CONCURRENCY} at a time, ${CONN_SECONDS} s a round, ${CONN_ROUNDS} rounds each (after one warm-up each)`);
  for (const variant of order(0)) await connRound(setup, variant);
  const rounds: ConnRound[] = [];
  for (let i = 0; i < CONN_ROUNDS; i++)
    for (const variant of order(i)) {
      const round = await connRound(setup, variant);
      rounds.push(round);
      log(
        `  ${variant}: ${round.rate.toFixed(0)} connections/s (${round.failed} failed), agent ${round.agentCpu.toFixed(2)} s CPU, ` +
          `netplug-flows ${round.aggregatorCpu.toFixed(2)} s, ${round.tracked} tracked`,
      );
    }
  return rounds;
}

export interface Recorded {
  /** Connections the client on the node with flow logs opened, all parts of the run. */
  opened: number;
  /** Its attempts to a port the policy denies (the setup's check): allowed by its profile, recorded at its end too. */
  deniedTries: number;
  /** Allowed flows in the records the aggregator holds: reported by the server's end (its policy) and the client's (its profile). */
  atServer: number;
  atClient: number;
  /** The policies the server's end recorded as deciding. */
  policies: string[];
  /** Records the agent sent, and dropped (netplug_flow_records_dropped_total). */
  sent: number;
  dropped: number;
  /** Connection tracking's events the agent's socket could not take (netplug_flow_events_overruns_total). */
  overruns: number;
}

/** What reached the aggregator, once the agent has sent its last interval, against what the client opened. */
export async function recorded({ sides, aggregator }: Setup): Promise<Recorded> {
  const response = await fetch(`http://127.0.0.1:${aggregator.readPort}/v1/flows?node=${SIDES.on.node}&action=Allow&limit=100000`);
  if (!response.ok) throw new Error(`netplug-flows: ${response.status} ${await response.text()}`);
  const { records } = (await response.json()) as { records: FlowRecord[] };
  const sum = (found: FlowRecord[]) => found.reduce((n, r) => n + r.flows, 0);
  const atServer = records.filter((r) => r.reporter === 'dst' && r.destination.name === 'server-on');
  return {
    opened: opened.on,
    deniedTries: deniedTries.on,
    atServer: sum(atServer),
    atClient: sum(records.filter((r) => r.reporter === 'src' && r.source.name === 'client-on')),
    policies: [...new Set(atServer.map((r) => r.policy.policy))],
    sent: await metricsSum(sides.on, ['netplug_flow_records_sent_total']),
    dropped: await metricsSum(sides.on, ['netplug_flow_records_dropped_total']),
    overruns: await metricsSum(sides.on, ['netplug_flow_events_overruns_total']),
  };
}
