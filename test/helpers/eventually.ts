// Waiting for something a test cannot be told about (an agent's route, a controller's write, a
// watch's event): poll until it holds. The one copy every test uses; its failure says what it
// waited for and what it saw last, so a timed-out test is not a bare "timed out".
import { inspect } from 'node:util';

export interface EventuallyOptions {
  /**
   * How long to keep trying (default 120 s: generous, as a loaded machine is slow; it bounds a
   * failure only, no claim about speed).
   */
  timeoutMs?: number;
  /** The pause between tries (default 200 ms). */
  intervalMs?: number;
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
  const { timeoutMs = 120_000, intervalMs = 200, context } = options;
  const deadline = Date.now() + timeoutMs;
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
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
