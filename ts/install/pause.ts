import { setTimeout as sleep } from 'node:timers/promises';

/** Waits `ms`; false when `signal` aborted first. */
export async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

/** Resolves when `signal` aborts. */
export const aborted = (signal: AbortSignal): Promise<void> =>
  signal.aborted ? Promise.resolve() : new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
