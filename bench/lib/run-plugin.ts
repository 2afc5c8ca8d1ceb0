// Runs a CNI plugin as a runtime does, a fresh process with the CNI environment and the netconf on
// stdin, timed from spawn to exit: the benchmarks' one way of invoking plugins. Spawned natively
// (native-exec.ts), as containerd and CRI-O spawn plugins: Node's spawn costs ~3 ms more per
// process on this VM, which every variant would carry and every ratio would be drawn to 1 by.
import { buildNativeHelpers, startNativeExec, type NativeExec, type Run } from './native-exec.ts';

export type { Run } from './native-exec.ts';

let native: NativeExec | undefined;

/** The native spawner, built and started on first use. */
function spawner(): NativeExec {
  if (!native) {
    buildNativeHelpers();
    native = startNativeExec();
  }
  return native;
}

/** Ends the native spawner, if started: a benchmark calls it once it has run its last process. */
export async function stopNativeRuns(): Promise<void> {
  await native?.close();
  native = undefined;
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

/** Runs to its exit; rejects, naming `label` and the process's output, unless it exits 0. */
export async function runChecked(
  label: string,
  executable: string,
  env: Record<string, string>,
  input: string,
  args: readonly string[] = [],
): Promise<Run> {
  const run = await spawner().run(executable, env, input, args);
  if (run.status !== 0) throw new Error(`${label} ${env['CNI_COMMAND'] ?? args.join(' ')} failed: ${run.stdout}${run.stderr}`);
  return run;
}

/** Runs to its exit (alone, or alongside others in a burst); resolves whatever the exit status. */
export function runToExit(executable: string, env: Record<string, string>, input: string): Promise<Run> {
  return spawner().run(executable, env, input);
}

/** Per variant, the ADD and DEL samples of a per-pod run. */
export function addDelSamples<V extends string>(variants: readonly V[]): Record<V, { add: number[]; del: number[] }> {
  return Object.fromEntries(variants.map((v) => [v, { add: [] as number[], del: [] as number[] }])) as Record<
    V,
    { add: number[]; del: number[] }
  >;
}
