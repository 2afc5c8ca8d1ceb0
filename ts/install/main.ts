// netplug-install: the node pod's install-cni container (reference-operator-and-upgrade §B, §E.3).
// `netplug-install` installs and stays running; `netplug-install --check` is its readiness probe.
import { whyNotInstalled } from './check-installed.ts';
import { type Log, makeLog } from './log.ts';
import { readSettings, SettingsError } from './settings.ts';

const USAGE = 'usage: netplug-install [--check | --upgrade-ipam]';

/** Runs netplug-install until `signal` aborts; resolves to the exit code. */
export function runInstallMain(argv: readonly string[], env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<number> {
  return runInstall(argv, env, signal, (line) => process.stderr.write(line));
}

/** runInstallMain with the log's destination given (tests collect it). */
export async function runInstall(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  write: (line: string) => void,
): Promise<number> {
  const log: Log = makeLog(env.LOG_LEVEL, write);
  // v3.30's init container upgrade-ipam (see upgrade-ipam.ts).
  if (argv[0] === '--upgrade-ipam' && argv.length === 1) return (await import('./upgrade-ipam.ts')).upgradeIpam(env, log);
  const check = argv[0] === '--check';
  if (argv.length > (check ? 1 : 0)) {
    log('ERROR', `unexpected argument "${argv[check ? 1 : 0]}"; ${USAGE}`);
    return 2;
  }
  let settings: ReturnType<typeof readSettings>;
  try {
    settings = readSettings(env);
  } catch (err) {
    if (!(err instanceof SettingsError)) throw err;
    log('ERROR', err.message);
    return 1;
  }
  if (check) {
    const reason = await whyNotInstalled(settings);
    if (reason) log('INFO', `not ready: ${reason}`);
    return reason ? 1 : 0;
  }
  // The installer proper loads @kubernetes/client-node; the readiness probe above does not.
  const { runInstaller } = await import('./run-installer.ts');
  return runInstaller(settings, log, signal);
}
