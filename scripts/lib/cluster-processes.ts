// Processes of a test cluster: daemons started inside the node's network namespace with
// `nsenter --net` (not `ip netns exec`, which also unshares the mount namespace: the kubelet's
// volume mounts must be visible to containerd and runc; the nodes of a cluster of several also
// enter their node's own mount namespace, all its daemons the same one), logging into the
// cluster's directory.
// Every one of them names that directory on its command line, which is how stop and the sweep of
// an interrupted run find them (containerd's shims too, by the socket path they are given).
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Daemon {
  name: string;
  pid: number;
  log: string;
  /** The last lines of its log, for error messages. */
  tail(): string;
  exited(): boolean;
}

/** nsenter's options for a node: its network namespace, and its own mount namespace if it has one. */
export const enterNode = (netnsPath: string, mountNs?: string) => [`--net=${netnsPath}`, ...(mountNs ? [`--mount=${mountNs}`] : [])];

/**
 * `env` without npm's node_modules/.bin directories on PATH: under `npm test` they come first, and
 * there @vercel/nft's `nft` (a dependency of the linters) would stand in for the kernel's nft,
 * which kube-proxy runs at start.
 */
function withSystemPath(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const path = (env['PATH'] ?? '')
    .split(':')
    .filter((dir) => !dir.endsWith('/node_modules/.bin'))
    .join(':');
  return { ...env, PATH: path };
}

export function startDaemon(
  enter: string[],
  logDir: string,
  name: string,
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Daemon {
  mkdirSync(logDir, { recursive: true });
  const log = join(logDir, `${name}.log`);
  const fd = openSync(log, 'a');
  // Detached: a ^C in the terminal reaches the test process, whose teardown then stops the
  // daemons in order, rather than every daemon at once.
  const child = spawn('nsenter', [...enter, '--', command, ...args], {
    stdio: ['ignore', fd, fd],
    detached: true,
    env: withSystemPath(env),
  });
  closeSync(fd);
  child.unref();
  let gone = false;
  child.once('exit', () => (gone = true));
  if (child.pid === undefined) throw new Error(`${name} did not start`);
  return {
    name,
    pid: child.pid,
    log,
    tail: () => readFileSync(log, 'utf8').split('\n').slice(-30).join('\n'),
    exited: () => gone,
  };
}

/** Live processes whose command line contains `dir`, with their executable's base name. */
export function processesNaming(dir: string): Array<{ pid: number; name: string }> {
  const found: Array<{ pid: number; name: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (!argv.some((arg) => arg.includes(dir)) || !alive(Number(entry))) continue;
      found.push({ pid: Number(entry), name: (argv[0] ?? '').split('/').pop() ?? '' });
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}

/** Exists and is not a zombie (a zombie is dead; its parent has not reaped it yet). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the processes are gone. */
export async function terminate(pids: number[], graceMs: number): Promise<void> {
  const signal = (pid: number, name: NodeJS.Signals) => {
    try {
      process.kill(pid, name);
    } catch {
      // Already gone.
    }
  };
  for (const pid of pids) signal(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (pids.some(alive) && Date.now() < deadline) await sleep(50);
  for (const pid of pids.filter(alive)) signal(pid, 'SIGKILL');
  while (pids.some(alive)) await sleep(20);
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
