// `netplug-install --check`, the install-cni container's readiness probe, on its own: the kubelet
// runs it every few seconds on every node, so it runs from the plugin's small bundle with its code
// cache (ts/cli/sea-main.ts) and loads nothing of the installer proper (@kubernetes/client-node).
import { type Log, programLog } from '../runtime/log.ts';
import { SettingsError } from '../runtime/settings.ts';
import { whyNotInstalled } from './check-installed.ts';
import { type InstallSettings, readSettings } from './settings.ts';

export const PROGRAM = 'netplug-install';
export const USAGE = `usage: ${PROGRAM} [--check]`;

/** The settings and a log at their level; undefined (after a line naming the bad variable) when they cannot be used. */
export function openSettings(env: NodeJS.ProcessEnv, write: (line: string) => void): { settings: InstallSettings; log: Log } | undefined {
  try {
    const settings = readSettings(env);
    return { settings, log: programLog(PROGRAM, write, settings.logLevel) };
  } catch (err) {
    if (!(err instanceof SettingsError)) throw err;
    programLog(PROGRAM, write).error(err.message);
    return undefined;
  }
}

/** `netplug-install --check ...`: 0 once this version's install is complete, 1 when not (a log line says why), 2 for a bad argument. */
export async function runInstallCheck(argv: readonly string[], env: NodeJS.ProcessEnv, write: (line: string) => void): Promise<number> {
  if (argv.length > 1) {
    programLog(PROGRAM, write).error(`unexpected argument "${argv[1]}"; ${USAGE}`);
    return 2;
  }
  const opened = openSettings(env, write);
  if (!opened) return 1;
  const reason = await whyNotInstalled(opened.settings);
  if (reason) opened.log.info(`not ready: ${reason}`);
  return reason ? 1 : 0;
}
