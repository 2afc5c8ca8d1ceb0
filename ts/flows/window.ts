// netplug-flows' window: the flow records it holds in memory, ordered by the end of their
// interval, oldest first. Bounded two ways, both dropping the oldest first:
// - retention: a record whose interval ended longer than `retentionMs` ago goes (one that arrives
//   already that old is dropped at once);
// - size: while the records' JSON (each record's `JSON.stringify`, in bytes) exceeds `maxBytes`.
// A record's place is its interval's end, but never later than when it arrived: a node whose clock
// runs ahead does not keep its records past the retention, nor ahead of the others.
// Pure: the caller gives the time, and counts what was dropped.
//
// API: `new FlowWindow({ retentionMs, maxBytes })`; add(records, now) and expire(now) → Dropped;
// query(filter, limit) → the newest `limit` matching records, newest last; records, bytes.
import type { FlowFilter, FlowRecord } from '../model/flow.ts';
import { matchesFilter } from './filter.ts';

export interface WindowLimits {
  retentionMs: number;
  maxBytes: number;
}

/** Records dropped by one call, by reason. */
export interface Dropped {
  retention: number;
  size: number;
}

interface Held {
  record: FlowRecord;
  /** Its place: the interval's end, at most its arrival. */
  at: number;
  bytes: number;
}

/** Dropped slots at the front are cut off once they are this many and half the array. */
const COMPACT_AFTER = 1024;

export class FlowWindow {
  readonly limits: WindowLimits;
  #items: Held[] = [];
  /** The first held item of #items (those before it are dropped). */
  #head = 0;
  #bytes = 0;

  constructor(limits: WindowLimits) {
    this.limits = limits;
  }

  /** Records held. */
  get records(): number {
    return this.#items.length - this.#head;
  }

  /** Their JSON's size in bytes. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Takes `records` (received at `now`), then drops what the limits no longer allow. */
  add(records: readonly FlowRecord[], now: number): Dropped {
    for (const record of records) {
      const held: Held = { record, at: Math.min(record.end, now), bytes: jsonBytes(record) };
      this.#insert(held);
      this.#bytes += held.bytes;
    }
    return this.expire(now);
  }

  /** Drops the records older than the retention, then the oldest while over the size. */
  expire(now: number): Dropped {
    const dropped: Dropped = { retention: 0, size: 0 };
    const cutoff = now - this.limits.retentionMs;
    while (this.records > 0 && (this.#items[this.#head] as Held).at < cutoff) {
      this.#dropOldest();
      dropped.retention++;
    }
    while (this.records > 0 && this.#bytes > this.limits.maxBytes) {
      this.#dropOldest();
      dropped.size++;
    }
    this.#compact();
    return dropped;
  }

  /** The newest `limit` records matching `filter`, oldest first (newest last). */
  query(filter: FlowFilter, limit: number): FlowRecord[] {
    const found: FlowRecord[] = [];
    for (let i = this.#items.length - 1; i >= this.#head && found.length < limit; i--) {
      const { record } = this.#items[i] as Held;
      if (matchesFilter(record, filter)) found.push(record);
    }
    return found.reverse();
  }

  /** After the last item whose place is at or before `held`'s: records of one time stay in arrival order. */
  #insert(held: Held): void {
    const items = this.#items;
    const last = items[items.length - 1];
    if (last === undefined || items.length === this.#head || last.at <= held.at) {
      items.push(held);
      return;
    }
    let low = this.#head;
    let high = items.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((items[middle] as Held).at <= held.at) low = middle + 1;
      else high = middle;
    }
    items.splice(low, 0, held);
  }

  #dropOldest(): void {
    const held = this.#items[this.#head] as Held;
    this.#bytes -= held.bytes;
    // Let the record be collected now, not at the next compaction.
    (this.#items as (Held | undefined)[])[this.#head] = undefined;
    this.#head++;
  }

  #compact(): void {
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head >= COMPACT_AFTER && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }
}

/** The size of a record as JSON, in bytes (UTF-8). */
export function jsonBytes(record: FlowRecord): number {
  return Buffer.byteLength(JSON.stringify(record));
}
