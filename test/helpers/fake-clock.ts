// A clock for the runtime's tests (ts/runtime/clock.ts): time moves only when the test advances
// it, firing the timers that fall due in order and letting the promise chains they start settle
// after each, so that loops, backoff, resyncs and leases are tested without real waiting.
import type { Clock, Timer } from '../../ts/runtime/clock.ts';

interface Pending {
  at: number;
  order: number;
  fn: () => void;
}

export class FakeClock implements Clock {
  private time: number;
  private order = 0;
  private readonly timers = new Set<Pending>();

  constructor(start = 1_000_000) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  after(ms: number, fn: () => void): Timer {
    const pending = { at: this.time + Math.max(0, ms), order: this.order++, fn };
    this.timers.add(pending);
    return { cancel: () => this.timers.delete(pending) };
  }

  /** Moves time on by `ms`, firing each timer due by then at its own time. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    await settle();
    for (;;) {
      const next = [...this.timers].filter((t) => t.at <= end).sort((a, b) => a.at - b.at || a.order - b.order)[0];
      if (!next) break;
      this.timers.delete(next);
      this.time = next.at;
      next.fn();
      await settle();
    }
    this.time = end;
    await settle();
  }

  /** Moves time to `at` (as now() reads it). */
  async advanceTo(at: number): Promise<void> {
    await this.advance(Math.max(0, at - this.time));
  }

  /** Timers waiting. */
  get pending(): number {
    return this.timers.size;
  }
}

/** Lets every promise chain that can progress without time do so. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}
