// Runs the built plugin as a runtime does (exactly the given environment, the netconf on stdin),
// inside a pids cgroup of its own: a case that forks without limit is contained and counted, a
// case that hangs is killed at its time limit with everything it started, and nothing outlives
// its case. Output is captured up to a bound, so a runaway writer cannot exhaust the test.
import { type ChildProcess, spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';

import { hasStackTrace, NETPLUG } from '../../helpers/cni.ts';

let pidsRoot: string | undefined;

/**
 * Where per-run cgroups go: cgroup v1's pids hierarchy, else cgroup v2's root with the pids
 * controller enabled for its children. Neither: the runs cannot be contained, and that fails.
 */
function cgroupRoot(): string {
  if (pidsRoot) return pidsRoot;
  if (existsSync('/sys/fs/cgroup/pids/cgroup.procs')) {
    pidsRoot = '/sys/fs/cgroup/pids';
    return pidsRoot;
  }
  try {
    if (readFileSync('/sys/fs/cgroup/cgroup.controllers', 'utf8').split(/\s+/).includes('pids')) {
      writeFileSync('/sys/fs/cgroup/cgroup.subtree_control', '+pids');
      pidsRoot = '/sys/fs/cgroup';
      return pidsRoot;
    }
  } catch {
    // not allowed here: reported below
  }
  throw new Error('no pids cgroup to run the plugin in (cgroup v1 /sys/fs/cgroup/pids, or v2 with the pids controller)');
}
const KEEP = 1024 * 1024;

export interface ExecOutcome {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  stdoutBytes: number;
  stderrBytes: number;
  timedOut: boolean;
  /** Most tasks (threads) the case had at once, the plugin and what it ran. */
  peakProcesses: number;
  /** Processes still in the case's cgroup after the plugin exited (killed then). */
  leftBehind: number;
}

export interface Limits {
  timeoutMs?: number;
  /** The cgroup refuses forks beyond this many tasks (threads count: a Node process has about ten). */
  maxProcesses?: number;
  executable?: string;
  /** The plugin's working directory (relative paths in a netconf land here); a temporary one by default. */
  cwd?: string;
  /** Called with the plugin's process once it runs (a fault test kills it at a chosen moment). */
  onSpawn?: (child: ChildProcess) => void;
}

let cases = 0;

function killAll(cgroup: string): number {
  let killed = 0;
  for (let round = 0; round < 200; round++) {
    const pids = readFileSync(`${cgroup}/cgroup.procs`, 'utf8').split('\n').filter(Boolean);
    if (pids.length === 0) return killed;
    for (const pid of pids) {
      try {
        process.kill(Number(pid), 'SIGKILL');
        killed++;
      } catch {
        // gone already
      }
    }
  }
  return killed;
}

function removeCgroup(cgroup: string): void {
  for (let round = 0; round < 100; round++) {
    killAll(cgroup);
    try {
      rmdirSync(cgroup);
      return;
    } catch {
      // a process still exiting: try again
    }
  }
}

/** One plugin run with `env` (nothing else) and `input` on stdin. */
export function runBounded(env: Record<string, string>, input: Buffer | string, limits: Limits = {}): Promise<ExecOutcome> {
  const { timeoutMs = 30_000, maxProcesses = 128, executable = NETPLUG } = limits;
  const cgroup = `${cgroupRoot()}/nptest-fuzz-${process.pid}-${cases++}`;
  mkdirSync(cgroup);
  writeFileSync(`${cgroup}/pids.max`, String(maxProcesses));
  return new Promise((resolve, reject) => {
    let child: ChildProcess & { stdout: Readable; stderr: Readable; stdin: Writable };
    try {
      child = spawn(executable, [], { env, cwd: limits.cwd ?? tmpdir(), stdio: ['pipe', 'pipe', 'pipe'] });
    } catch (err) {
      removeCgroup(cgroup);
      reject(err);
      return;
    }
    try {
      // Synchronously after the fork, before the event loop turns: the plugin has not started
      // anything of its own yet.
      if (child.pid !== undefined) writeFileSync(`${cgroup}/cgroup.procs`, String(child.pid));
    } catch {
      // exited already
    }
    limits.onSpawn?.(child);
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let [stdoutBytes, stderrBytes] = [0, 0];
    child.stdout.on('data', (chunk: Buffer) => {
      if (stdoutBytes < KEEP) stdout.push(chunk);
      stdoutBytes += chunk.length;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderrBytes < KEEP) stderr.push(chunk);
      stderrBytes += chunk.length;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killAll(cgroup);
    }, timeoutMs);
    child.stdin.on('error', () => undefined); // a plugin that exits without reading stdin
    child.stdin.end(input);
    child.on('error', (err) => {
      clearTimeout(timer);
      removeCgroup(cgroup);
      reject(err);
    });
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      const peak = existsSync(`${cgroup}/pids.peak`) ? Number(readFileSync(`${cgroup}/pids.peak`, 'utf8')) : 0;
      const leftBehind = killAll(cgroup);
      removeCgroup(cgroup);
      resolve({
        status,
        signal,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: Buffer.concat(stderr).toString('utf8'),
        stdoutBytes,
        stderrBytes,
        timedOut,
        peakProcesses: peak,
        leftBehind,
      });
    });
  });
}

/** Largest stderr a case may write (log lines, not echoed megabytes). */
export const STDERR_CAP = 64 * 1024;

/**
 * What is wrong with a run: `codes` are the CNI error codes this case may end with (exit 1); any
 * run may instead succeed (exit 0) unless `mustFail`.
 */
export function judgeRun(
  run: ExecOutcome,
  codes: readonly number[],
  options: { mustFail?: boolean; maxTasks?: number } = {},
): string | undefined {
  if (run.timedOut) return `hang: killed after its time limit (${run.peakProcesses} processes at peak)`;
  if (run.signal) return `killed by ${run.signal}`;
  if (run.peakProcesses > (options.maxTasks ?? 48)) return `ran ${run.peakProcesses} tasks at once (runaway delegation?)`;
  if (run.leftBehind > 0) return `left ${run.leftBehind} processes running after it exited`;
  if (run.stderrBytes > STDERR_CAP) return `wrote ${run.stderrBytes} bytes to stderr`;
  // At log level DEBUG an internal error (999) logs its stack on purpose: the 999 is the finding.
  if (hasStackTrace(run.stdout) || (hasStackTrace(run.stderr) && codeOf(run) !== 999))
    return `printed a stack trace: ${(run.stdout + run.stderr).slice(0, 300)}`;
  if (run.status === 0) return options.mustFail ? `succeeded; expected error ${codes.join('/')}` : undefined;
  if (run.status !== 1) return `exited ${run.status}`;
  let error: { code?: unknown; msg?: unknown; cniVersion?: unknown };
  try {
    error = JSON.parse(run.stdout);
  } catch {
    return `exit 1 without one JSON error object on stdout: ${JSON.stringify(run.stdout.slice(0, 200))}`;
  }
  if (typeof error !== 'object' || error === null || !Number.isInteger(error.code) || typeof error.msg !== 'string')
    return `exit 1 with a malformed error object: ${run.stdout.slice(0, 200)}`;
  if (typeof error.cniVersion !== 'string') return 'error object without cniVersion';
  if (run.stdoutBytes > 16 * 1024)
    return `error ${error.code} of ${run.stdoutBytes} bytes, echoing a value in full: ${error.msg.slice(0, 60)}`;
  if (!codes.includes(error.code as number))
    return `error ${error.code} (expected ${codes.join('/') || 'success'}): ${error.msg.slice(0, 300)}`;
  return undefined;
}

/** The error code of a failed run, if it printed one. */
export function codeOf(run: ExecOutcome): number | undefined {
  if (run.status !== 1) return undefined;
  try {
    const code = (JSON.parse(run.stdout) as { code?: unknown }).code;
    return typeof code === 'number' ? code : undefined;
  } catch {
    return undefined;
  }
}

/** At most `width` runs at once, as a node's runtime under a modest load. */
export function limiter(width: number): <T>(job: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (job) => {
    while (running >= width) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    try {
      return await job();
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}
