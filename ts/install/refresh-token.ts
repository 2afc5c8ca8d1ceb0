// Keeps the plugin's token fresh while the installer runs (the reference's token_watch.go): a new
// TokenRequest after a quarter of the token's remaining life plus up to as much again at random
// (nodes spread out), or every CNI_TOKEN_REFRESH_INTERVAL; 5 s after a failure or near expiry.
import type { Log } from './log.ts';
import { describeApiError, type KubeAccess } from './open-kube-access.ts';
import { pause } from './pause.ts';
import type { InstallSettings } from './settings.ts';
import { writeKubeconfig } from './write-kubeconfig.ts';

const RETRY_MS = 5000;

/** Milliseconds until the next refresh of a token expiring at `expires`. */
export function nextRefreshMs(expires: Date, now: number, overrideMs: number | undefined, random: () => number = Math.random): number {
  if (overrideMs !== undefined) return overrideMs;
  const quarter = (expires.getTime() - now) / 4;
  return quarter < RETRY_MS ? RETRY_MS : quarter + random() * quarter;
}

export async function keepTokenFresh(
  settings: InstallSettings,
  kube: KubeAccess,
  expires: Date,
  log: Log,
  signal: AbortSignal,
): Promise<void> {
  let wait = nextRefreshMs(expires, Date.now(), settings.tokenRefreshMs);
  while (await pause(wait, signal)) {
    try {
      wait = nextRefreshMs(await writeKubeconfig(settings, kube, log), Date.now(), settings.tokenRefreshMs);
    } catch (err) {
      log('WARNING', `cannot refresh the CNI plugin's token (retrying in 5 s): ${describeApiError(err)}`);
      wait = RETRY_MS;
    }
  }
}
