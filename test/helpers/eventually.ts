// Waiting for something a test cannot be told about (an agent's route, a controller's write, a
// watch's event): poll until it holds. The one copy every test uses; its failure says what it
// waited for and what it saw last, so a timed-out test is not a bare "timed out".
import { inspect } from 'node:util';

const FIRST_PAUSE_MS = 200;
const MAX_PAUSE_MS = 2000;

export interface EventuallyOptions {
  /**
   * How long to keep trying (default 120 s: generous, as a loaded machine is slow; it bounds a
   * failure only, no claim about speed).
   */
  timeoutMs?: number;
  /**
   * The pause between tries. Default: 200 ms, growing with the wait to a tenth of the time waited
   * so far, at most 2 s. A long wait (a rollout, a kubelet) then polls rarely: each try of many
   * checks is a process (kubectl, ip), and on two cores the tries of a 200 ms poll held through a
   * minute-long wait took CPU from the very thing waited for. Given, the pause is fixed.
   */
  intervalMs?: number;
  /** The first pause of a growing one (default 200 ms): more for a try that costs a process. */
  firstIntervalMs?: number;
  /** More to say on failure (a daemon's log tail). */
  context?: () => string;
}

/**
 * Calls `check` until it returns a value other than false, undefined or null, and returns that
 * value. A try that throws counts as not yet (a server still starting); failing after `timeoutMs`,
 * the error names `what` and the last value or error seen.
 */
export async function eventually<T>(
  what: string,
  check: () => T | Promise<T>,
  options: EventuallyOptions = {},
): Promise<Exclude<T, false | undefined | null>> {
  const { timeoutMs = 120_000, intervalMs, firstIntervalMs = FIRST_PAUSE_MS, context } = options;
  const started = Date.now();
  const deadline = started + timeoutMs;
  const pause = () => intervalMs ?? Math.max(firstIntervalMs, Math.min(MAX_PAUSE_MS, (Date.now() - started) / 10));
  let last: string;
  for (;;) {
    try {
      const value = await check();
      if (value !== false && value !== undefined && value !== null) return value as Exclude<T, false | undefined | null>;
      last = `last value: ${inspect(value)}`;
    } catch (err) {
      last = `last error: ${err instanceof Error ? err.message : inspect(err)}`;
    }
    if (Date.now() >= deadline) {
      const more = context?.();
      throw new Error(`gave up waiting for ${what} after ${timeoutMs / 1000} s (${last})${more ? `\n${more}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(pause(), Math.max(0, deadline - Date.now()))));
  }
}
