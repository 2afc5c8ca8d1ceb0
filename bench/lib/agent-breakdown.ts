// bench:agent's breakdown of a command through the agent: where its time went, from the agent's own
// timings (NETPLUG_CNI_TIMINGS_FILE, ts/node/cni/call-timings.ts) and the spawner's, on the monotonic
// clock both share.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

import type { CallTimings } from '../../ts/node/cni/call-timings.ts';
import type { Run } from './run-plugin.ts';

/** The agent's ADD and DEL of one pod, as spawned (for the breakdown). */
export type AgentCycle = { container: string; add: Run; del: Run };

/**
 * Until the pod's eth0 is gone: a pod's DEL through the agent answers while the kernel is still
 * deleting the veth (its routes and addresses gone, the kubelet removing the namespace next). The
 * agent would make the next command in that namespace wait for it; waited for here, untimed, so
 * that no ADD's figure includes another pod's deletion. Throws after 10 s.
 */
export async function interfaceGone(netns: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (spawnSync('ip', ['-n', netns, 'link', 'show', 'eth0'], { stdio: 'ignore' }).status === 0) {
    if (Date.now() > deadline) throw new Error(`eth0 is still in ${netns} 10 s after its DEL`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** The parts of a command through the agent, each a series of per-command milliseconds. */
export const PARTS = [
  'shim: spawn → the agent accepts its connection',
  'handshake: request read, accept, go',
  'datastore',
  "kernel, outside the datastore's time",
  "the rest: the agent's own work",
  'shim: answer → exit',
] as const;

/**
 * A span within the parts, not one of them: from go until the command's first datastore request
 * (the commit of a steady ADD) was made. The agent's work before it (the netconf, the pod's
 * facts, the allocation planned) delays the commit; kernel calls run beside it.
 */
const BEFORE_DATASTORE = "of the agent's time: go → its first datastore request" as const;

/** The rows of a command's breakdown: the parts, then the span across them. */
export const ROWS = [...PARTS, BEFORE_DATASTORE] as const;
type Row = (typeof ROWS)[number];

/** Per command of `cycles`, where its time went, from the agent's timings of it. */
export function breakdown(timingsFile: string, cycles: readonly AgentCycle[], command: 'ADD' | 'DEL'): Record<Row, number[]> {
  const timings = new Map(
    readFileSync(timingsFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as CallTimings)
      .map((t) => [`${t.command}/${t.container}`, t]),
  );
  const parts = Object.fromEntries(ROWS.map((row) => [row, [] as number[]])) as Record<Row, number[]>;
  for (const cycle of cycles) {
    const run = command === 'ADD' ? cycle.add : cycle.del;
    const t = timings.get(`${command}/${cycle.container}`);
    if (!t) throw new Error(`no timings of ${command} ${cycle.container} in ${timingsFile}`);
    const served = t.answered - t.go;
    const rest = served - t.datastoreMs - t.kernelAloneMs;
    parts[PARTS[0]].push(t.accepted - run.startMs);
    parts[PARTS[1]].push(t.go - t.accepted);
    parts[PARTS[2]].push(t.datastoreMs);
    parts[PARTS[3]].push(t.kernelAloneMs);
    parts[PARTS[4]].push(rest);
    parts[PARTS[5]].push(run.startMs + run.ms - t.answered);
    if (t.firstDatastoreAt !== undefined) parts[BEFORE_DATASTORE].push(t.firstDatastoreAt - t.go);
  }
  return parts;
}
