// netplug-install: the node pod's install-cni container, on the runtime of the resident programs.
// `netplug-install` installs and stays running; `netplug-install --check` is its readiness probe
// (check-main.ts), which loads neither @kubernetes/client-node nor the runtime's parts that do.
import { programLog } from '../runtime/log.ts';
import { SettingsError } from '../runtime/settings.ts';
import { PROGRAM, runInstallCheck, USAGE } from './check-main.ts';
import { type InstallSettings, readSettings } from './settings.ts';

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
  let log = programLog(PROGRAM, write);
  if (argv.length > 0) {
    log.error(`unexpected argument "${argv[0]}"; ${USAGE}`);
    return 2;
  }
  let settings: InstallSettings;
  try {
    settings = readSettings(env);
  } catch (err) {
    if (!(err instanceof SettingsError)) throw err;
    log.error(err.message);
    return 1;
  }
  log = programLog(PROGRAM, write, settings.logLevel);
  // The installer proper loads @kubernetes/client-node; the readiness probe above does not.
  const { runInstaller } = await import('./run-installer.ts');
  return runInstaller(settings, log, signal, informers);
}
