// netplug-install: the node pod's install-cni container, on the runtime of the resident programs.
// `netplug-install` installs and stays running; `netplug-install --check` is its readiness probe
// (check-main.ts), which loads neither @kubernetes/client-node nor the runtime's parts that do.
import { programLog } from '../runtime/log.ts';
import { openSettings, PROGRAM, runInstallCheck, USAGE } from './check-main.ts';

/** Runs netplug-install until `signal` aborts; resolves to the exit code. */
export function runInstallMain(argv: readonly string[], env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<number> {
  return runInstall(argv, env, signal, (line) => process.stderr.write(line));
}

/** runInstallMain with the log's destination given (tests collect it), and the quiet-watch timeout tests shorten. */
export async function runInstall(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  write: (line: string) => void,
  informers: { watchTimeoutMs?: number } = {},
): Promise<number> {
  if (argv[0] === '--check') return runInstallCheck(argv, env, write);
  if (argv.length > 0) {
    programLog(PROGRAM, write).error(`unexpected argument "${argv[0]}"; ${USAGE}`);
    return 2;
  }
  const opened = openSettings(env, write);
  if (!opened) return 1;
  const { settings, log } = opened;
  // The installer proper loads @kubernetes/client-node; the readiness probe above does not.
  const { runInstaller } = await import('./run-installer.ts');
  return runInstaller(settings, log, signal, informers);
}
