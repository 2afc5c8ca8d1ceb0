// How long to wait after a failure: exponential (doubling) from `initialMs` up to `maxMs`, with
// jitter so that many retries of one cause (every replica, every key after an outage) spread out
// instead of arriving together. The one backoff of the resident programs: the work queue's per key,
// the informers' restarts, start-up work, a leader's retries.
//
// API: `Backoff` (next, reset, failures), `KeyedBackoff` (per key: next, forget);
// `retry(attempt, options)` repeats an attempt until it succeeds or the signal aborts;
// `every(ms, task, options)` runs a task now and then every `ms` until the signal aborts.
import { type Clock, sleep, systemClock } from './clock.ts';

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Each delay is lengthened by up to this fraction, at random (default 0.1). */
  jitter?: number;
  /** Where the randomness comes from (tests give a fixed one). */
  random?: () => number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 1000, maxMs: 60_000, jitter: 0.1 };

/** The delay after the `failures`-th failure in a row (1 for the first). */
function backoffDelay(options: BackoffOptions, failures: number): number {
  const base = Math.min(options.maxMs, options.initialMs * 2 ** Math.max(0, failures - 1));
  return Math.round(base * (1 + (options.jitter ?? 0.1) * (options.random ?? Math.random)()));
}

export class Backoff {
  private count = 0;
  private readonly options: BackoffOptions;

  constructor(options: BackoffOptions = DEFAULT_BACKOFF) {
    this.options = options;
  }

  /** The delay before the next attempt, one more failure counted. */
  next(): number {
    this.count++;
    return backoffDelay(this.options, this.count);
  }

  reset(): void {
    this.count = 0;
  }

  get failures(): number {
    return this.count;
  }
}

/** One backoff per key: a key that keeps failing waits longer, the others are not held back. */
export class KeyedBackoff<K> {
  private readonly counts = new Map<K, number>();
  private readonly options: BackoffOptions;

  constructor(options: BackoffOptions = DEFAULT_BACKOFF) {
    this.options = options;
  }

  next(key: K): number {
    const count = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, count);
    return backoffDelay(this.options, count);
  }

  /** The key succeeded: its next failure starts from `initialMs` again. */
  forget(key: K): void {
    this.counts.delete(key);
  }

  failures(key: K): number {
    return this.counts.get(key) ?? 0;
  }
}

export interface RetryOptions {
  signal: AbortSignal;
  backoff?: BackoffOptions;
  clock?: Clock;
  /** Told of each failure and the delay before the next attempt. */
  failed?(err: unknown, delayMs: number): void;
}

/** `attempt` until it resolves; undefined if `signal` aborted first. */
export async function retry<T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T | undefined> {
  const backoff = new Backoff(options.backoff);
  while (!options.signal.aborted) {
    try {
      return await attempt();
    } catch (err) {
      const delay = backoff.next();
      options.failed?.(err, delay);
      await sleep(delay, options.signal, options.clock);
    }
  }
  return undefined;
}

/** Runs `task` now and then `ms` after each run ends, until `signal` aborts. A task handles its own failures. */
export async function every(ms: number, task: () => Promise<void>, options: { signal: AbortSignal; clock?: Clock }): Promise<void> {
  while (!options.signal.aborted) {
    await task();
    await sleep(ms, options.signal, options.clock ?? systemClock);
  }
}
