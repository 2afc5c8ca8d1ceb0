// netplug-flows' own metrics, on the program's registry (ts/runtime/metrics.ts):
//   netplug_flows_records_received_total                  records accepted from writers
//   netplug_flows_records_dropped_total{reason}           retention, size: dropped from the window
//   netplug_flows_writes_refused_total{reason}            batches refused, by why
//   netplug_flows_records_held, netplug_flows_bytes_held   the window now
//   netplug_flows_followers                               reads following the records as they arrive
import { Counter, Gauge, type Registry } from 'prom-client';

import type { Dropped } from './window.ts';

export type RefusedReason =
  | 'unauthenticated'
  | 'forbidden'
  | 'node-mismatch'
  | 'malformed'
  | 'too-large'
  | 'unsupported-encoding'
  | 'review-failed';

export class FlowsMetrics {
  readonly #received: Counter;
  readonly #dropped: Counter<'reason'>;
  readonly #refused: Counter<'reason'>;
  readonly #records: Gauge;
  readonly #bytes: Gauge;
  readonly #followers: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.#received = new Counter({
      name: 'netplug_flows_records_received_total',
      help: 'Flow records accepted from writers.',
      registers,
    });
    this.#dropped = new Counter({
      name: 'netplug_flows_records_dropped_total',
      help: 'Flow records dropped from the window, oldest first: retention (older than NETPLUG_FLOWS_RETENTION) or size (beyond NETPLUG_FLOWS_MAX_BYTES).',
      labelNames: ['reason'] as const,
      registers,
    });
    this.#refused = new Counter({
      name: 'netplug_flows_writes_refused_total',
      help: 'Batches refused: unauthenticated, forbidden, node-mismatch, malformed, too-large, unsupported-encoding, review-failed (the TokenReview could not be made).',
      labelNames: ['reason'] as const,
      registers,
    });
    this.#records = new Gauge({ name: 'netplug_flows_records_held', help: 'Flow records in the window.', registers });
    this.#bytes = new Gauge({ name: 'netplug_flows_bytes_held', help: "The window's records as JSON, in bytes.", registers });
    this.#followers = new Gauge({ name: 'netplug_flows_followers', help: 'Reads following the records as they arrive.', registers });
    for (const reason of ['retention', 'size']) this.#dropped.inc({ reason }, 0);
  }

  received(records: number): void {
    this.#received.inc(records);
  }

  dropped(dropped: Dropped): void {
    if (dropped.retention > 0) this.#dropped.inc({ reason: 'retention' }, dropped.retention);
    if (dropped.size > 0) this.#dropped.inc({ reason: 'size' }, dropped.size);
  }

  refused(reason: RefusedReason): void {
    this.#refused.inc({ reason });
  }

  held(records: number, bytes: number): void {
    this.#records.set(records);
    this.#bytes.set(bytes);
  }

  followers(count: number): void {
    this.#followers.set(count);
  }
}
