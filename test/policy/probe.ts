// The test's side of the pods' processes (pod-process.ts): one per network namespace, asked over
// its stdin, and the truth table probed through them: every (from, to, port, protocol) at once,
// each probe with a source port of its own.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import type { Netns } from '../helpers/nodes.ts';
import type { Teardowns } from '../helpers/shared.ts';
import type { TestPod } from './cluster.ts';

const POD_PROCESS = fileURLToPath(new URL('./pod-process.ts', import.meta.url));

export class NetnsProcess {
  readonly #child: ChildProcess;
  readonly #waiting = new Map<number, { resolve: (reply: unknown) => void; reject: (err: Error) => void }>();
  #next = 0;
  /** Settles once every server of the process listens. */
  readonly ready: Promise<void>;

  /** Serving TCP and UDP on `ports` inside `netns` (none: a prober only). */
  constructor(shared: Teardowns, netns: Netns, ports: readonly number[] = []) {
    // By path: a namespace of `ip netns` or one containerd made for a pod.
    this.#child = spawn('nsenter', [`--net=${netns.path}`, '--', process.execPath, POD_PROCESS, ...ports.map(String)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    shared.teardown(() => this.#child.kill('SIGKILL'));
    const lines = createInterface({ input: this.#child.stdout as NodeJS.ReadableStream });
    this.ready = new Promise((resolve, reject) => {
      this.#child.once('exit', (code) => {
        const err = new Error(`the process in ${netns.name} exited (${code})`);
        reject(err);
        for (const waiting of this.#waiting.values()) waiting.reject(err);
        this.#waiting.clear();
      });
      lines.on('line', (line) => {
        if (line === 'ready') return resolve();
        const reply = JSON.parse(line) as { id: number };
        this.#waiting.get(reply.id)?.resolve(reply);
        this.#waiting.delete(reply.id);
      });
    });
  }

  #ask<T>(request: object): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#waiting.set(id, { resolve: resolve as (reply: unknown) => void, reject });
      this.#child.stdin?.write(`${JSON.stringify({ id, ...request })}\n`);
    });
  }

  /** Whether each probe got through (TCP: the handshake; UDP: the echo) within `timeoutMs`, or proves nothing ('late'). */
  async probe(probes: readonly WireProbe[], timeoutMs: number): Promise<Outcome[]> {
    return (await this.#ask<{ results: Outcome[] }>({ probes, timeoutMs })).results;
  }

  /** The UDP senders (`<address>:<port>`) its servers heard from since the last call. */
  async received(): Promise<Set<string>> {
    return new Set((await this.#ask<{ received: string[] }>({ received: true })).received);
  }

  /** A GET from inside the namespace (status 0: no answer). */
  fetch(url: string): Promise<{ status: number; text: string }> {
    return this.#ask({ fetch: url });
  }
}

/** A probe's outcome: through, not through in time, or not known (the prober was not running when its time was up). */
export type Outcome = 'allow' | 'deny' | 'late';

export interface WireProbe {
  address: string;
  port: number;
  protocol: 'TCP' | 'UDP';
  sourcePort: number;
}

export interface Cell {
  from: TestPod;
  to: TestPod;
  port: number;
  protocol: 'TCP' | 'UDP';
}

export const cellName = (cell: Cell): string => `${cell.from.key} → ${cell.to.key} ${cell.port}/${cell.protocol}`;

/**
 * Source ports handed out in turn (per source pod, 10000–59999): a port comes back only after
 * 50000 probes from that pod, long after any conntrack entry of its last use has gone (a reused
 * 5-tuple still in conntrack would be let through as established, whatever the policy says now).
 */
export class SourcePorts {
  readonly #next = new Map<string, number>();

  take(pod: string): number {
    const n = this.#next.get(pod) ?? 0;
    this.#next.set(pod, (n + 1) % 50_000);
    return 10_000 + n;
  }
}

/**
 * One round: every cell probed at once, from its source pod's process; each cell's outcome. A UDP
 * datagram the destination's server got counts as through even if its echo was slow to come back
 * (the echo waits for that process to run; what reached its socket had passed the policy).
 */
export async function probeRound(
  cells: readonly Cell[],
  processes: ReadonlyMap<string, NetnsProcess>,
  ports: SourcePorts,
  timeoutMs: number,
): Promise<Map<string, Outcome>> {
  const bySource = new Map<string, Cell[]>();
  for (const cell of cells) bySource.set(cell.from.key, [...(bySource.get(cell.from.key) ?? []), cell]);
  const processOf = (key: string) => {
    const found = processes.get(key);
    if (!found) throw new Error(`no process for ${key}`);
    return found;
  };
  const sent = new Map<string, string>();
  const outcomes = new Map<string, Outcome>();
  await Promise.all(
    [...bySource].map(async ([source, list]) => {
      const wire = list.map((cell) => ({
        address: cell.to.ipv4,
        port: cell.port,
        protocol: cell.protocol,
        sourcePort: ports.take(source),
      }));
      for (const [i, cell] of list.entries()) sent.set(cellName(cell), `${cell.from.ipv4}:${wire[i]?.sourcePort}`);
      const results = await processOf(source).probe(wire, timeoutMs);
      for (const [i, cell] of list.entries()) outcomes.set(cellName(cell), results[i] ?? 'late');
    }),
  );
  const heard = new Map(await Promise.all([...processes].map(async ([key, each]) => [key, await each.received()] as const)));
  for (const cell of cells)
    if (cell.protocol === 'UDP' && heard.get(cell.to.key)?.has(sent.get(cellName(cell)) ?? '')) outcomes.set(cellName(cell), 'allow');
  return outcomes;
}
