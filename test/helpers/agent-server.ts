// netplug-node serving CNI, the built program (dist/bin/netplug-node), so that a test can
// kill -9 it and start it again on the same socket and journal. Its temporary directory holds the
// socket (run/cni.sock, the journal in run/inflight/) and NETPLUG_VAR_DIR; stopped at teardown.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout } from 'node:timers/promises';

import type { ExecutionContext } from 'ava';

import { waitServing } from './agent-client.ts';
import { DIST_CNI, requireBuilt, ROOT, tempDir } from './cni.ts';
import { freePort } from './etcd.ts';
import { eventually } from './eventually.ts';

const NETPLUG_NODE = join(ROOT, 'dist/bin/netplug-node');

export interface AgentProcess {
  pid: number;
  dir: string;
  /** Its health server (/livez, /readyz, /metrics). */
  health: string;
  socket: string;
  /** Everything the agent wrote to stderr so far. */
  output(): string;
  /** SIGKILL, as an OOM kill or a crash would end it. */
  kill(): Promise<void>;
  /** SIGTERM; resolves to the exit code once it has stopped. */
  stop(): Promise<number | null>;
}

export interface AgentOptions {
  /** The directory of a previous agent (the same socket, journal and files): a restart. */
  dir?: string;
  /** Wait until it serves and its start-up work (the default pool) is done (default true). */
  waitServing?: boolean;
  /**
   * Directories the agent does not see: it runs in a mount namespace of its own with an empty
   * tmpfs over each, as a container shows none of the host's /run/netns that it does not mount.
   */
  hide?: string[];
}

export async function spawnAgent(
  t: Pick<ExecutionContext, 'teardown'>,
  env: Record<string, string>,
  options: AgentOptions = {},
): Promise<AgentProcess> {
  requireBuilt();
  const dir = options.dir ?? tempDir(t, 'agent');
  const socket = join(dir, 'run', 'cni.sock');
  mkdirSync(join(dir, 'var'), { recursive: true });
  const port = await freePort();
  const hidden = options.hide ?? [];
  const [command, args] =
    hidden.length === 0
      ? [NETPLUG_NODE, []]
      : [
          'unshare',
          [
            '--mount',
            '--propagation=private',
            'sh',
            '-c',
            `${hidden.map((_, i) => `mount -t tmpfs netplug-hidden "\${${i + 1}}"`).join(' && ')} && shift ${hidden.length} && exec "$@"`,
            'sh',
            ...hidden,
            NETPLUG_NODE,
          ],
        ];
  const child: ChildProcess = spawn(command, args, {
    env: {
      PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      NETPLUG_VAR_DIR: join(dir, 'var'),
      NETPLUG_HEALTH_ADDR: `127.0.0.1:${port}`,
      NETPLUG_AGENT_SOCKET: socket,
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let output = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (text: string) => (output += text));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // Its stderr read to the end: output() after a stop holds the last lines. Bounded, in case a
  // process it started still holds the pipe.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const drained = () => Promise.race([closed, setTimeout(5_000, undefined, { ref: false })]);
  const alive = () => child.exitCode === null && child.signalCode === null;
  t.teardown(async () => {
    if (alive()) child.kill('SIGKILL');
    await exited;
  });
  const agent: AgentProcess = {
    pid: child.pid as number,
    dir,
    health: `http://127.0.0.1:${port}`,
    socket,
    output: () => output,
    kill: async () => {
      child.kill('SIGKILL');
      await exited;
      await drained();
    },
    stop: async () => {
      if (alive()) child.kill('SIGTERM');
      const code = await exited;
      await drained();
      return code;
    },
  };
  if (options.waitServing ?? true) {
    const failed = exited.then((code) => {
      throw new Error(`netplug-node exited ${code} before serving:\n${output}`);
    });
    // Over once it exited too: `failed` then says why.
    const startedUp = eventually('netplug-node to finish its start-up work', () => output.includes('start-up work done') || !alive(), {
      intervalMs: 50,
    });
    await Promise.race([Promise.all([waitServing(socket), startedUp]), failed]);
    failed.catch(() => undefined);
  }
  return agent;
}

/** Whether the agent's socket is there (it removes it when it stops). */
export const socketExists = (agent: AgentProcess) => existsSync(agent.socket);

/** The one-shot plugin: beside the shim once the shim is installed (netplug-oneshot), else the SEA as `netplug`. */
export const ONE_SHOT = existsSync(join(DIST_CNI, 'netplug-oneshot')) ? join(DIST_CNI, 'netplug-oneshot') : join(DIST_CNI, 'netplug');

/** One sample of the agent's /metrics, by its name and labels as written (`name{label="value"}`); 0 when absent. */
export async function agentMetric(agent: AgentProcess, sample: string): Promise<number> {
  // Generous: right after a burst, on a loaded machine, the agent may take seconds to answer.
  const text = await (await fetch(`${agent.health}/metrics`, { signal: AbortSignal.timeout(30_000) })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
  return line ? Number(line.slice(sample.length + 1)) : 0;
}
