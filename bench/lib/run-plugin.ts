// Runs a CNI plugin as a runtime does, a fresh process with the CNI environment and the netconf on
// stdin, timed from spawn to exit: the benchmarks' one way of invoking plugins.
import { spawn, spawnSync } from 'node:child_process';

import { elapsedMs } from './stats.ts';

export interface Run {
  status: number | null;
  stdout: string;
  ms: number;
}

/** The environment a runtime gives a plugin for one command on interface eth0 of `/run/netns/<netns>`. */
export function runtimeEnv(
  command: string,
  container: string,
  netns: string,
  cniPath: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    CNI_COMMAND: command,
    CNI_CONTAINERID: container,
    CNI_NETNS: `/run/netns/${netns}`,
    CNI_IFNAME: 'eth0',
    CNI_PATH: cniPath,
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    ...extra,
  };
}

/** Runs to completion; throws, naming `label` and the plugin's output, unless it exits 0. */
export function runPlugin(label: string, executable: string, env: Record<string, string>, input: string): Run {
  const start = process.hrtime.bigint();
  const run = spawnSync(executable, [], { env, input, encoding: 'utf8' });
  const ms = elapsedMs(start);
  if (run.status !== 0) throw new Error(`${label} ${env['CNI_COMMAND']} failed: ${run.stdout}${run.stderr}`);
  return { status: run.status, stdout: run.stdout, ms };
}

/** Runs alongside others (bursts, or while this process serves something); resolves whatever the exit status. */
export function runPluginAsync(executable: string, env: Record<string, string>, input: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const child = spawn(executable, [], { env, stdio: ['pipe', 'pipe', 'ignore'] });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, ms: elapsedMs(start) }));
    child.stdin.end(input);
  });
}

/** Per variant, the ADD and DEL samples of a per-pod run. */
export function addDelSamples<V extends string>(variants: readonly V[]): Record<V, { add: number[]; del: number[] }> {
  return Object.fromEntries(variants.map((v) => [v, { add: [] as number[], del: [] as number[] }])) as Record<
    V,
    { add: number[]; del: number[] }
  >;
}
