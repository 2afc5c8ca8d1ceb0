// A work queue of keys in client-go's shape (what controller-runtime reconcilers are fed from):
// - a key waits at most once: adding a waiting key again coalesces with it;
// - a key handed out is never handed out again before `done`; added meanwhile, it waits and comes
//   back after `done` (so no two workers ever reconcile one key at once, and no change is missed);
// - `addAfter` delays a key (requeueAfter, a settle delay, backoff); a key delayed twice keeps the
//   earlier time;
// - `addRateLimited` delays it by its own exponential backoff with jitter, `forget` resets that
//   and drops the key's delays scheduled before it was handed out: the reconcile that succeeded
//   read the state after them (a retry of an older failure, an older requeue), so they would only
//   repeat it.
//
// API: `new WorkQueue({ clock, backoff, depth })`; add, addAfter, addRateLimited, forget, get
// (resolves to the next key, undefined once shut down), done, shutDown, length.
import { type BackoffOptions, DEFAULT_BACKOFF, KeyedBackoff } from './backoff.ts';
import { type Clock, systemClock, type Timer } from './clock.ts';

export interface WorkQueueOptions {
  clock?: Clock;
  backoff?: BackoffOptions;
  /** Told the number of waiting keys whenever it changes (the queue depth metric). */
  depth?(waiting: number): void;
}

export class WorkQueue<K> {
  private readonly clock: Clock;
  private readonly backoff: KeyedBackoff<K>;
  private readonly depth: (waiting: number) => void;
  private readonly queue: K[] = [];
  /** Keys added and not yet handed out (waiting, or to come back after `done`). */
  private readonly dirty = new Set<K>();
  private readonly processing = new Set<K>();
  /** Delayed keys; `scheduled` orders them against hand-outs (`tick`), and is renewed by every addAfter it absorbs. */
  private readonly delayed = new Map<K, { at: number; timer: Timer; scheduled: number }>();
  /** When each key being processed was handed out. */
  private readonly handedOut = new Map<K, number>();
  private tick = 0;
  private readonly getters: ((key: K | undefined) => void)[] = [];
  private shut = false;

  constructor(options: WorkQueueOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.backoff = new KeyedBackoff(options.backoff ?? DEFAULT_BACKOFF);
    this.depth = options.depth ?? (() => undefined);
  }

  add(key: K): void {
    if (this.shut || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    this.push(key);
  }

  /** Adds `key` after `ms`; a key already delayed to an earlier time keeps that time. */
  addAfter(key: K, ms: number): void {
    if (this.shut) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.clock.now() + ms;
    const waiting = this.delayed.get(key);
    if (waiting && waiting.at <= at) {
      // It now also stands for this later request, which `forget` must not drop.
      waiting.scheduled = this.tick++;
      return;
    }
    waiting?.timer.cancel();
    const timer = this.clock.after(ms, () => {
      this.delayed.delete(key);
      this.add(key);
    });
    this.delayed.set(key, { at, timer, scheduled: this.tick++ });
  }

  /** Adds `key` after its backoff (one more failure counted); returns the delay. */
  addRateLimited(key: K): number {
    const delay = this.backoff.next(key);
    this.addAfter(key, delay);
    return delay;
  }

  /** The key handed out succeeded: its backoff starts over, and delays older than its hand-out are dropped. */
  forget(key: K): void {
    this.backoff.forget(key);
    const waiting = this.delayed.get(key);
    const since = this.handedOut.get(key);
    if (waiting && since !== undefined && waiting.scheduled < since) {
      waiting.timer.cancel();
      this.delayed.delete(key);
    }
  }

  failures(key: K): number {
    return this.backoff.failures(key);
  }

  /** The next key, once there is one; undefined once the queue is shut down. */
  get(): Promise<K | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) return Promise.resolve(this.handOut(key));
    if (this.shut) return Promise.resolve(undefined);
    return new Promise((resolve) => this.getters.push(resolve));
  }

  /** The key handed out is reconciled; if it was added meanwhile, it waits again. */
  done(key: K): void {
    this.processing.delete(key);
    this.handedOut.delete(key);
    if (this.dirty.has(key) && !this.shut) this.push(key);
  }

  /** Stops handing out keys: waiting and delayed keys are dropped, and every `get` resolves to undefined. */
  shutDown(): void {
    this.shut = true;
    for (const { timer } of this.delayed.values()) timer.cancel();
    this.delayed.clear();
    this.queue.length = 0;
    this.dirty.clear();
    this.depth(0);
    for (const resolve of this.getters.splice(0)) resolve(undefined);
  }

  /** Keys waiting to be handed out (not the delayed ones). */
  get length(): number {
    return this.queue.length;
  }

  private push(key: K): void {
    const getter = this.getters.shift();
    if (getter) getter(this.handOut(key));
    else {
      this.queue.push(key);
      this.depth(this.queue.length);
    }
  }

  private handOut(key: K): K {
    this.dirty.delete(key);
    this.processing.add(key);
    this.handedOut.set(key, this.tick++);
    this.depth(this.queue.length);
    return key;
  }
}
