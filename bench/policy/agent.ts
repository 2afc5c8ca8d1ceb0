// The processes bench/policy.ts runs in a node's network namespace: netplug-node itself (started
// here rather than by the topology, for its pid: its RSS and CPU time are figures), and the prober
// (bench/policy-probe.ts), through which the bench reaches the agent's health server and times
// connections from inside a namespace.
import { spawn, type ChildProcess, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import type { TestNode } from '../../test/helpers/nodes.ts';
import { collector, NETPLUG_NODE, PROBE, scratch, until } from './session.ts';
import { PORT } from './settings.ts';

interface ProbeReply {
  id: number;
  startNs?: string;
  timeout?: boolean;
  attempts?: number;
  status?: number;
  text?: string;
}

/** The passes so far of the agent's policy (netplug_policy_flush_duration_seconds): their count and total seconds. */
export interface Flushes {
  count: number;
  seconds: number;
}

/** bench/policy-probe.ts inside `netns`. */
export class Probe {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #pending = new Map<number, (reply: ProbeReply) => void>();
  #next = 1;

  constructor(netns: string) {
    this.#child = spawn('ip', ['netns', 'exec', netns, process.execPath, PROBE], { stdio: ['pipe', 'pipe', 'pipe'] });
    createInterface({ input: this.#child.stdout }).on('line', (line) => {
      const reply = JSON.parse(line) as ProbeReply;
      this.#pending.get(reply.id)?.(reply);
      this.#pending.delete(reply.id);
    });
    this.#child.stderr.resume();
    collector.teardown(() => this.#child.kill('SIGKILL'));
  }

  request(body: Record<string, unknown>): Promise<ProbeReply> {
    const id = this.#next++;
    return new Promise((resolve) => {
      this.#pending.set(id, resolve);
      this.#child.stdin.write(`${JSON.stringify({ id, ...body })}\n`);
    });
  }

  /** Waits until `host` no longer takes connections (untimed): a reset between samples. */
  async closed(host: string): Promise<void> {
    const reply = await this.request({ op: 'closed', host, port: PORT, timeoutMs: 30_000 });
    if (reply.timeout) throw new Error(`${host}:${PORT} still connects after 30 s`);
  }

  async get(path: string): Promise<{ status: number; text: string }> {
    const reply = await this.request({ op: 'get', url: `http://127.0.0.1:9099${path}` });
    return { status: reply.status ?? 0, text: reply.text ?? '' };
  }
}

/** netplug-node on a node of the topology (started here, not by the topology, for its pid). */
export class Agent {
  child: ChildProcess | undefined;
  logText = '';
  readonly probe: Probe;

  readonly node: TestNode;
  readonly env: Record<string, string>;
  /** The agent's own timings of the commands it serves (NETPLUG_CNI_TIMINGS_FILE). */
  readonly timings: string;

  constructor(node: TestNode, env: Record<string, string>) {
    this.node = node;
    this.timings = join(scratch, `cni-timings-${node.name}.jsonl`);
    this.env = { ...env, NETPLUG_CNI_TIMINGS_FILE: this.timings };
    this.probe = new Probe(node.netns.name);
    collector.teardown(() => this.stop());
  }

  start(): bigint {
    const started = process.hrtime.bigint();
    this.logText = '';
    this.child = spawn('ip', ['netns', 'exec', this.node.netns.name, NETPLUG_NODE], { env: this.env, stdio: ['ignore', 'ignore', 'pipe'] });
    this.child.stderr?.setEncoding('utf8').on('data', (text: string) => {
      this.logText = (this.logText + text).slice(-20_000);
    });
    return started;
  }

  async stop(): Promise<void> {
    const running = this.child;
    this.child = undefined;
    if (!running || running.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      running.once('exit', () => resolve());
      running.kill('SIGTERM');
      setTimeout(() => running.kill('SIGKILL'), 15_000).unref();
    });
  }

  async ready(timeoutMs = 300_000): Promise<void> {
    await until(
      `${this.node.name}'s agent ready`,
      async () => {
        if (this.child?.exitCode !== null) throw new Error(`netplug-node on ${this.node.name} exited: ${this.logText.slice(-3000)}`);
        return (await this.probe.get('/readyz')).status === 200;
      },
      timeoutMs,
      25,
    ).catch((err: unknown) => {
      throw new Error(`${err instanceof Error ? err.message : err}\n${this.logText.slice(-3000)}`);
    });
  }

  /** The agent's resident memory (its process is the one `ip netns exec` became). */
  rssMiB(): number {
    const status = readFileSync(`/proc/${this.child?.pid}/status`, 'utf8');
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]) / 1024;
  }

  /** CPU seconds the agent has used (user + system, /proc/<pid>/stat, at 100 ticks a second). */
  cpuSeconds(): number {
    const fields = readFileSync(`/proc/${this.child?.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) / 100;
  }

  /** The policy passes so far: their count and total seconds (netplug_policy_flush_duration_seconds). */
  async flushes(): Promise<Flushes> {
    const text = (await this.probe.get('/metrics')).text;
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 'NaN');
    return {
      count: value('netplug_policy_flush_duration_seconds_count'),
      seconds: value('netplug_policy_flush_duration_seconds_sum'),
    };
  }
}
