// Keeps the plugin's token fresh while the installer runs (the reference's token_watch.go): a new
// TokenRequest after a quarter of the token's remaining life plus up to as much again at random
// (nodes spread out), or every CNI_TOKEN_REFRESH_INTERVAL; 5 s after a failure or near expiry.
import { retry } from '../runtime/backoff.ts';
import { sleep } from '../runtime/clock.ts';
import { describeError } from '../runtime/errors.ts';
import type { Log } from '../runtime/log.ts';
import type { KubeAccess } from './open-kube-access.ts';
import type { InstallSettings } from './settings.ts';
import { writeKubeconfig } from './write-kubeconfig.ts';

const RETRY_MS = 5000;
/** A failed refresh is tried again every 5 s: the token's remaining life, not a backoff, is what bounds the wait. */
const RETRY = { initialMs: RETRY_MS, maxMs: RETRY_MS, jitter: 0 };

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
  while (await sleep(wait, signal)) {
    const refreshed = await retry(() => writeKubeconfig(settings, kube, log), {
      signal,
      backoff: RETRY,
      failed: (err, delayMs) =>
        log.warning(`cannot refresh the CNI plugin's token (retrying in ${delayMs / 1000} s): ${describeError(err)}`),
    });
    if (refreshed === undefined) return;
    wait = nextRefreshMs(refreshed, Date.now(), settings.tokenRefreshMs);
  }
}
