// Sends flow records to the flow-log aggregator (netplug-flows): POST <aggregator>/v1/flows, a
// FlowBatch, with the node's ServiceAccount token for audience netplug-flows (a projected token
// file, read at each send: the kubelet rotates it). One request at a time; what waits is bounded,
// and what cannot be sent (the aggregator away, refusing, the queue full) is dropped and counted,
// never held up: a node that cannot reach the aggregator keeps forwarding traffic.
import { readFile } from 'node:fs/promises';

import type { Counter } from 'prom-client';

import type { Logger } from '../../log/logger.ts';
import type { FlowRecord } from '../../model/flow.ts';
import { describeError } from '../../runtime/errors.ts';

/** Records waiting at most; more are dropped. */
const MAX_QUEUED = 20_000;
/** Records in one request at most. */
const BATCH = 2_000;
const TIMEOUT_MS = 10_000;

export interface FlowSenderOptions {
  /** `http://netplug-flows.kube-system.svc:9445` */
  aggregator: string;
  /** The token file; absent: no Authorization header (an aggregator for tests). */
  tokenFile?: string;
  log: Logger;
  /** Records sent, and dropped by reason (`queue-full`, `unreachable`, `refused`). */
  sent: Counter;
  dropped: Counter<'reason'>;
}

export class FlowSender {
  readonly #options: FlowSenderOptions;
  #queue: FlowRecord[] = [];
  #sending: Promise<void> | undefined;
  #failing = false;

  constructor(options: FlowSenderOptions) {
    this.#options = options;
  }

  /** Queues records and starts sending them; returns at once. */
  send(records: readonly FlowRecord[]): void {
    const room = MAX_QUEUED - this.#queue.length;
    if (records.length > room) this.#options.dropped.inc({ reason: 'queue-full' }, records.length - Math.max(0, room));
    this.#queue.push(...records.slice(0, Math.max(0, room)));
    this.#sending ??= this.#drain().finally(() => {
      this.#sending = undefined;
    });
  }

  /** Resolves once what is queued now was sent or dropped. */
  async idle(): Promise<void> {
    while (this.#sending) await this.#sending;
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, BATCH);
      const outcome = await this.#post(batch);
      if (outcome === 'sent') {
        this.#options.sent.inc(batch.length);
        if (this.#failing) this.#options.log.info(`flow logs: the aggregator ${this.#options.aggregator} takes records again`);
        this.#failing = false;
        continue;
      }
      this.#options.dropped.inc({ reason: outcome.reason }, batch.length);
      if (!this.#failing)
        this.#options.log.warning(`flow logs: ${batch.length} records dropped: ${outcome.message}; traffic is not affected`);
      this.#failing = true;
    }
  }

  async #post(records: FlowRecord[]): Promise<'sent' | { reason: 'unreachable' | 'refused'; message: string }> {
    const { aggregator, tokenFile } = this.#options;
    try {
      const token = tokenFile ? (await readFile(tokenFile, 'utf8')).trim() : undefined;
      const response = await fetch(new URL('/v1/flows', aggregator), {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ records }),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      const text = await response.text();
      if (response.ok) return 'sent';
      return { reason: 'refused', message: `the aggregator answered ${response.status}: ${text.slice(0, 200)}` };
    } catch (err) {
      return { reason: 'unreachable', message: `cannot reach the aggregator ${aggregator}: ${describeError(err)}` };
    }
  }
}
