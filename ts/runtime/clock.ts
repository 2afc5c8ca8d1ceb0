// Time as the resident programs read it, injected everywhere the runtime waits (the work queue,
// backoff, resync, leases, health polls), so that their tests run on a fake clock
// (test/helpers/fake-clock.ts) without real waiting.
//
// API: `Clock` (now, after), `systemClock`; `sleep(ms, signal, clock)`, the one abortable sleep;
// `aborted(signal)`, a promise of the signal's abort.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fn` once after `ms` (0 or less: as soon as possible), unless cancelled first. */
  after(ms: number, fn: () => void): Timer;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, Math.max(0, ms));
    return { cancel: () => clearTimeout(timer) };
  },
};

/** Waits `ms`; resolves to false as soon as `signal` aborts (at once if it already has), else true. */
export function sleep(ms: number, signal?: AbortSignal, clock: Clock = systemClock): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      timer.cancel();
      resolve(false);
    };
    const timer = clock.after(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Resolves when `signal` aborts. */
export const aborted = (signal: AbortSignal): Promise<void> =>
  signal.aborted ? Promise.resolve() : new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
