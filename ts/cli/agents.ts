// Entry point of the long-running programs' bundle (netplug-node, netplug-install,
// netplug-kube-controllers, netplug-operator, netplug-flows, netplug-flow-viewer). A second asset of the single
// executable, so the CNI plugin's start-up never parses their libraries (@kubernetes/client-node
// and its dependencies).
import { NETPLUG_VERSION } from '../version.ts';
import { programName, writeAll } from './process-io.ts';

export type AgentMain = (argv: readonly string[], env: NodeJS.ProcessEnv, signal: AbortSignal) => Promise<number>;

export const AGENTS: Record<string, () => Promise<AgentMain>> = {
  'netplug-node': async () => (await import('../node/main.ts')).runNodeMain,
  'netplug-install': async () => (await import('../install/main.ts')).runInstallMain,
  'netplug-kube-controllers': async () => (await import('../controllers/main.ts')).runControllersMain,
  'netplug-operator': async () => (await import('../operator/main.ts')).runOperatorMain,
  'netplug-flows': async () => (await import('../flows/main.ts')).runFlowsMain,
  'netplug-flow-viewer': async () => (await import('../viewer/main.ts')).runViewerMain,
  // Only its cluster commands come here (ts/cli/sea-main.ts); the others run from the plugin's bundle.
  netplugctl: async () => {
    const { runClusterCtlMain } = await import('./cluster-commands.ts');
    return (argv, env, signal) =>
      runClusterCtlMain(argv, env, { out: (text) => writeAll(1, text), err: (text) => writeAll(2, text), signal });
  },
};

/**
 * How long a program that stopped cleanly waits for what is still open (a request in flight to a
 * slow API server, a socket closing) before it exits anyway: its work is done and its state
 * written, and a kubelet waiting out the grace period would kill it less cleanly.
 */
const LINGER_MS = 2_000;

/** Sets the exit code; the process exits once nothing is left open, or after LINGER_MS. */
export function exitAfterStop(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), LINGER_MS).unref();
}

/** Runs the agent named by how the executable was invoked; SIGTERM and SIGINT stop it cleanly. */
export function main(): void {
  const program = programName();
  if (process.argv[2] === '--version') {
    writeAll(1, `${program} ${NETPLUG_VERSION}\n`);
    return;
  }
  const load = AGENTS[program];
  if (!load) {
    writeAll(2, `${program}: not one of ${Object.keys(AGENTS).join(', ')}\n`);
    process.exitCode = 2;
    return;
  }
  const stop = new AbortController();
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => stop.abort());
  load()
    .then((run) => run(process.argv.slice(2), process.env, stop.signal))
    .then(
      (code) => exitAfterStop(code),
      (err: unknown) => {
        writeAll(2, `${program}: ${err instanceof Error ? err.message : String(err)}\n`);
        exitAfterStop(1);
      },
    );
}
