// The reconcile runner, in controller-runtime's shape: events only enqueue keys (work-queue.ts);
// workers take keys off the queue and call `reconcile(key)`, which reads the state afresh
// (level-triggered: a missed event is made up by the next reconcile) and is idempotent.
// - one reconcile per key at a time; triggers for a key coalesce while it waits;
// - `{ requeueAfterMs }` from a reconcile brings the key back then (a deadline it waits for);
// - a failed reconcile brings the key back after its own backoff (exponential, with jitter; reset
//   by a success), never after the resync period; the same failure over and over is logged once;
// - a success drops the key's retries and requeues scheduled before it began (it read the state
//   after them), not a trigger that came while it ran;
// - every `resyncMs`, every known key (enqueued so far, or listed by `keys`) is reconciled again;
// - `settleMs`: `trigger` waits this long, so that a burst of events (a relist) gives one reconcile.
// The runner runs while `run(signal)` does (a leader runs it while it holds the lease; manager.ts),
// and may be run again after it stopped. Time comes from the injected clock.
//
// API: `new Controller({ name, reconcile, log, clock?, workers?, resyncMs?, settleMs?, backoff?,
// keys?, metrics? })`; run(signal), enqueue(key), enqueueAfter(key, ms), trigger(key) (after
// settleMs), succeeded() (a reconcile succeeded in this run), running(), and `handlerFor`, an
// informer handler that enqueues the keys an object maps to.
import { performance } from 'node:perf_hooks';

import type { BackoffOptions } from './backoff.ts';
import { type Clock, systemClock, type Timer } from './clock.ts';
import { describeError } from './errors.ts';
import type { Handler } from './informers.ts';
import type { Log } from './log.ts';
import type { RuntimeMetrics } from './metrics.ts';
import { WorkQueue } from './work-queue.ts';

/** What a reconcile may ask for: to be called again for this key after `requeueAfterMs`. */
export interface Requeue {
  requeueAfterMs?: number;
}

export type Reconcile = (key: string, signal: AbortSignal) => Promise<Requeue | undefined>;

export interface ControllerOptions {
  /** For log lines, metrics and readiness: `node` gives "the node controller". */
  name: string;
  reconcile: Reconcile;
  log: Log;
  clock?: Clock;
  /** Keys reconciled at once (default 1); never the same key twice. */
  workers?: number;
  /** Every known key is reconciled again this often (default: never). */
  resyncMs?: number;
  /** How long `trigger` waits for more events of a burst (default 0). */
  settleMs?: number;
  /** After a failed reconcile (default: 1 s doubling to 60 s, 10 % jitter). */
  backoff?: BackoffOptions;
  /** Keys that exist besides those enqueued (the objects of a cache): reconciled at start and each resync. */
  keys?: () => Iterable<string>;
  metrics?: RuntimeMetrics;
}

export class Controller {
  readonly name: string;
  private readonly options: ControllerOptions;
  private readonly clock: Clock;
  private readonly known = new Set<string>();
  /** The last failure logged per key, so that the same one is not logged on every retry. */
  private readonly failing = new Map<string, string>();
  private queue: WorkQueue<string> | undefined;
  private successes = 0;

  constructor(options: ControllerOptions) {
    this.name = options.name;
    this.options = options;
    this.clock = options.clock ?? systemClock;
  }

  /** Reconciles `key` soon. While the controller is not running, the key is only remembered. */
  enqueue(key: string): void {
    this.known.add(key);
    this.queue?.add(key);
  }

  enqueueAfter(key: string, ms: number): void {
    this.known.add(key);
    this.queue?.addAfter(key, ms);
  }

  /** `enqueue` after the settle delay: what event handlers call. */
  trigger(key: string): void {
    this.enqueueAfter(key, this.options.settleMs ?? 0);
  }

  /** Whether a reconcile succeeded since the controller last started. */
  succeeded(): boolean {
    return this.successes > 0;
  }

  running(): boolean {
    return this.queue !== undefined;
  }

  /** Runs the workers until `signal` aborts; resolves once the reconciles running then have ended. */
  async run(signal: AbortSignal): Promise<void> {
    if (this.queue) throw new Error(`the ${this.name} controller is running already`);
    const { metrics } = this.options;
    const queue = new WorkQueue<string>({
      clock: this.clock,
      ...(this.options.backoff ? { backoff: this.options.backoff } : {}),
      depth: (waiting) => metrics?.queueDepth(this.name, waiting),
    });
    this.queue = queue;
    this.successes = 0;
    this.failing.clear();
    const resyncAll = () => {
      for (const key of this.options.keys?.() ?? []) this.known.add(key);
      for (const key of this.known) queue.add(key);
    };
    let resync: Timer | undefined;
    const { resyncMs } = this.options;
    const scheduleResync = () => {
      if (resyncMs === undefined || resyncMs <= 0) return;
      resync = this.clock.after(resyncMs, () => {
        resyncAll();
        scheduleResync();
      });
    };
    const stop = () => {
      resync?.cancel();
      queue.shutDown();
    };
    if (signal.aborted) stop();
    else signal.addEventListener('abort', stop, { once: true });
    resyncAll();
    scheduleResync();
    try {
      await Promise.all(Array.from({ length: Math.max(1, this.options.workers ?? 1) }, () => this.work(queue, signal)));
    } finally {
      signal.removeEventListener('abort', stop);
      stop();
      this.queue = undefined;
    }
  }

  private async work(queue: WorkQueue<string>, signal: AbortSignal): Promise<void> {
    for (let key = await queue.get(); key !== undefined; key = await queue.get()) {
      const started = performance.now();
      const seconds = () => (performance.now() - started) / 1000;
      try {
        const result = await this.options.reconcile(key, signal);
        queue.forget(key);
        this.successes++;
        if (this.failing.delete(key)) this.options.log.info(`${this.name} controller: ${key} reconciled again`);
        const after = result?.requeueAfterMs;
        if (after !== undefined) queue.addAfter(key, after);
        this.options.metrics?.reconciled(this.name, after === undefined ? 'success' : 'requeue', seconds());
      } catch (err) {
        const delay = queue.addRateLimited(key);
        this.options.metrics?.reconciled(this.name, 'error', seconds());
        const text = describeError(err);
        if (this.failing.get(key) !== text && !signal.aborted)
          this.options.log.warning(
            `${this.name} controller: reconciling ${key} failed, retrying in ${(delay / 1000).toFixed(1)} s: ${text}`,
          );
        this.failing.set(key, text);
      } finally {
        queue.done(key);
      }
    }
  }
}

/**
 * An informer handler that triggers `controller` for the keys each added, changed or deleted
 * object maps to (controller-runtime's EnqueueRequestsFromMapFunc); `synced` triggers `onSynced`'s keys.
 */
export function handlerFor<T>(
  controller: Pick<Controller, 'trigger'>,
  keysOf: (object: T) => string | readonly string[] | undefined,
  options: { onSynced?: readonly string[] } = {},
): Handler<T> {
  const triggerAll = (keys: string | readonly string[] | undefined) => {
    for (const key of typeof keys === 'string' ? [keys] : (keys ?? [])) controller.trigger(key);
  };
  const trigger = (object: T) => triggerAll(keysOf(object));
  return {
    add: trigger,
    update: (object) => trigger(object),
    delete: trigger,
    ...(options.onSynced ? { synced: () => triggerAll(options.onSynced) } : {}),
  };
}
