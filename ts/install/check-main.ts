// `netplug-install --check`, the install-cni container's readiness probe, on its own: the kubelet
// runs it every few seconds on every node, so it runs from the plugin's small bundle with its code
// cache (ts/cli/sea-main.ts) and loads nothing of the installer proper (@kubernetes/client-node).
import { programLog } from '../runtime/log.ts';
import { SettingsError } from '../runtime/settings.ts';
import { whyNotInstalled } from './check-installed.ts';
import { type InstallSettings, readSettings } from './settings.ts';

export const PROGRAM = 'netplug-install';
export const USAGE = `usage: ${PROGRAM} [--check]`;

/** `netplug-install --check ...`: 0 once this version's install is complete, 1 when not (a log line says why), 2 for a bad argument. */
export async function runInstallCheck(argv: readonly string[], env: NodeJS.ProcessEnv, write: (line: string) => void): Promise<number> {
  let log = programLog(PROGRAM, write);
  if (argv.length > 1) {
    log.error(`unexpected argument "${argv[1]}"; ${USAGE}`);
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
  const reason = await whyNotInstalled(settings);
  if (reason) log.info(`not ready: ${reason}`);
  return reason ? 1 : 0;
}
