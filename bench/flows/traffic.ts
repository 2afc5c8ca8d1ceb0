// The traffic of bench/flows.ts, each run as a process of its own inside the client pod's network
// namespace: iperf3's client against the server pod's iperf3 (bits per second), and
// bench/flows-connect.ts opening and closing connections to the server pod's listener. And what
// the bench reads around them: a process's CPU time, connection tracking cleared of a round's
// connections.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { runToExit } from '../lib/run-to-exit.ts';
import { collector } from '../policy/session.ts';
import { CONN_PORT, IPERF_PORT, type Variant } from './settings.ts';
import type { Side } from './setup.ts';

const CONNECT = join(new URL('../../', import.meta.url).pathname, 'bench/flows-connect.ts');

const running = new Set<ChildProcess>();
collector.teardown(() => {
  for (const child of running) child.kill('SIGKILL');
});

/** `command` inside `netns`, to its exit; its stdout, or an error with its stderr. */
function runIn(netns: string, command: string[], timeoutMs: number): Promise<string> {
  return runToExit(['ip', 'netns', 'exec', netns, ...command], `${command.join(' ')} in ${netns}`, timeoutMs, running);
}

/** Connections each variant's client opened (or tried), of every kind: what the node with flow logs should have recorded. */
export const opened: Record<Variant, number> = { on: 0, off: 0 };
/** Attempts each variant's client made to a port the policy denies (its profile allows them: its end records them). */
export const deniedTries: Record<Variant, number> = { on: 0, off: 0 };

export interface Connected {
  completed: number;
  failed: number;
  seconds: number;
}

/** New connections from the client to the server for `seconds`, `concurrency` at a time (bench/flows-connect.ts). */
export async function connectFor(side: Side, seconds: number, concurrency: number): Promise<Connected> {
  const out = await runIn(
    side.client.netns,
    [process.execPath, CONNECT, side.server.address, String(CONN_PORT), String(seconds), String(concurrency)],
    seconds * 1000 + 30_000,
  );
  const done = JSON.parse(out) as Connected;
  opened[side.variant] += done.completed + done.failed;
  return done;
}

export interface Iperf {
  /** What the server received, bits per second (the first second omitted). */
  bitsPerSecond: number;
  retransmits: number;
}

/** iperf3 from the client to the server for `seconds` (after one second omitted: the connection's slow start). */
export async function iperf(side: Side, seconds: number): Promise<Iperf> {
  const out = await runIn(
    side.client.netns,
    ['iperf3', '--client', side.server.address, '--port', String(IPERF_PORT), '--time', String(seconds), '--omit', '1', '--json'],
    seconds * 1000 + 30_000,
  );
  // Its control connection and one stream.
  opened[side.variant] += 2;
  const result = JSON.parse(out) as { end?: { sum_received?: { bits_per_second?: number }; sum_sent?: { retransmits?: number } } };
  const bitsPerSecond = result.end?.sum_received?.bits_per_second;
  if (bitsPerSecond === undefined) throw new Error(`iperf3 gave no result: ${out.slice(0, 2000)}`);
  return { bitsPerSecond, retransmits: result.end?.sum_sent?.retransmits ?? 0 };
}

/** CPU seconds process `pid` has used (user + system, /proc/<pid>/stat, at 100 ticks a second). */
export function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Deletes the node's connection tracking entries of connections to the server pod; how many went. */
export function clearTracked(side: Side): number {
  // It lists every entry it deletes on stdout: thousands.
  const run = spawnSync('ip', ['netns', 'exec', side.node.netns.name, 'conntrack', '-D', '-p', 'tcp', '-d', side.server.address], {
    encoding: 'utf8',
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  return Number(/(\d+) flow entries have been deleted/.exec(run.stderr)?.[1] ?? 0);
}
