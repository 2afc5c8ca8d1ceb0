// etcd's v3 key-value API through its JSON gateway (POST /v3/kv/range, /v3/kv/txn): keys and
// values base64 in transit, 64-bit numbers as strings, zero values left out of answers.
import type { GatewayConnection } from './http.ts';

export interface KeyValue {
  key: string;
  value: Buffer;
  modRevision: string;
  version: string;
}

export type Compare = { key: string; target: 'VERSION'; version: string } | { key: string; target: 'MOD'; modRevision: string };

export type Operation = { put: { key: string; value: Buffer } } | { delete: { key: string } };

interface RawKeyValue {
  key: string;
  value?: string;
  mod_revision?: string;
  version?: string;
}

const encode = (text: string | Buffer) => Buffer.from(text).toString('base64');
const decode = (kv: RawKeyValue): KeyValue => ({
  key: Buffer.from(kv.key, 'base64').toString('utf8'),
  value: Buffer.from(kv.value ?? '', 'base64'),
  modRevision: kv.mod_revision ?? '0',
  version: kv.version ?? '0',
});

/** The end of the key range that holds every key starting with `prefix`. */
export function prefixEnd(prefix: string): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]); // every key
}

export interface RangeRequest {
  key: string;
  prefix?: boolean;
  keysOnly?: boolean;
}

function rangeBody(key: string, options: Omit<RangeRequest, 'key'>) {
  return {
    key: encode(key),
    ...(options.prefix ? { range_end: prefixEnd(key).toString('base64') } : {}),
    ...(options.keysOnly ? { keys_only: true } : {}),
  };
}

/**
 * etcd's key-value API as the Store uses it: the JSON gateway's client here, or gRPC's
 * (grpc.ts, for the resident programs).
 */
export interface KvClient {
  /** Where etcd is, for messages: `http://10.0.0.1:2379`. */
  readonly origin: string;
  /** Requests sent, for the benchmarks' count of datastore round trips. */
  readonly requests: number;
  range(key: string, options?: { prefix?: boolean; keysOnly?: boolean }): Promise<KeyValue[]>;
  /** Several ranges in one request (a transaction without conditions), read at one revision. */
  ranges(requests: readonly RangeRequest[]): Promise<KeyValue[][]>;
  /** Applies `success` if every comparison holds, else the ranges `failure` (after `failurePuts`); says which happened. */
  txnElseRange(
    compare: readonly Compare[],
    success: readonly Operation[],
    failure: readonly RangeRequest[],
    failurePuts?: readonly Operation[],
  ): Promise<{ succeeded: boolean; ranges: KeyValue[][]; revision: string }>;
  warmUp(): void;
  close(): void;
  /** Where the client can: the keys under `prefix` listed, then each change (see Store.follow). */
  watchPrefix?(prefix: string, events: PrefixEvents): { stop(): void };
}

export interface PrefixEvents {
  listed(kvs: KeyValue[]): void;
  put(kv: KeyValue): void;
  deleted(key: string): void;
  failed(err: Error): void;
}

export class EtcdClient implements KvClient {
  readonly connection: GatewayConnection;
  requests = 0;

  constructor(connection: GatewayConnection) {
    this.connection = connection;
  }

  get origin(): string {
    return this.connection.current.origin;
  }

  warmUp(): void {
    this.connection.warmUp();
  }

  close(): void {
    this.connection.close();
  }

  async range(key: string, options: { prefix?: boolean; keysOnly?: boolean } = {}): Promise<KeyValue[]> {
    const answer = (await this.call('/v3/kv/range', rangeBody(key, options))) as { kvs?: RawKeyValue[] };
    return (answer.kvs ?? []).map(decode);
  }

  async ranges(requests: readonly RangeRequest[]): Promise<KeyValue[][]> {
    const answer = (await this.call('/v3/kv/txn', { success: requests.map((r) => ({ request_range: rangeBody(r.key, r) })) })) as {
      responses?: { response_range?: { kvs?: RawKeyValue[] } }[];
    };
    return requests.map((_, i) => (answer.responses?.[i]?.response_range?.kvs ?? []).map(decode));
  }

  /** Applies `success` if every comparison holds, else nothing; says which happened. */
  async txn(compare: readonly Compare[], success: readonly Operation[]): Promise<boolean> {
    return (await this.txnElseRange(compare, success, [])).succeeded;
  }

  async txnElseRange(
    compare: readonly Compare[],
    success: readonly Operation[],
    failure: readonly RangeRequest[],
    failurePuts: readonly Operation[] = [],
  ): Promise<{ succeeded: boolean; ranges: KeyValue[][]; revision: string }> {
    const op = (o: Operation) =>
      'put' in o
        ? { request_put: { key: encode(o.put.key), value: o.put.value.toString('base64') } }
        : { request_delete_range: { key: encode(o.delete.key) } };
    const answer = (await this.call('/v3/kv/txn', {
      compare: compare.map((c) =>
        c.target === 'VERSION'
          ? { key: encode(c.key), target: 'VERSION', result: 'EQUAL', version: c.version }
          : { key: encode(c.key), target: 'MOD', result: 'EQUAL', mod_revision: c.modRevision },
      ),
      success: success.map(op),
      // The puts first, so that the ranges see them.
      ...(failure.length + failurePuts.length > 0
        ? { failure: [...failurePuts.map(op), ...failure.map((r) => ({ request_range: rangeBody(r.key, r) }))] }
        : {}),
    })) as { succeeded?: boolean; header?: { revision?: string }; responses?: { response_range?: { kvs?: RawKeyValue[] } }[] };
    const succeeded = answer.succeeded === true;
    const first = failurePuts.length;
    return {
      succeeded,
      revision: answer.header?.revision ?? '0',
      ranges: succeeded ? [] : failure.map((_, i) => (answer.responses?.[first + i]?.response_range?.kvs ?? []).map(decode)),
    };
  }

  private call(path: string, body: unknown): Promise<unknown> {
    this.requests++;
    return this.connection.post(path, body);
  }
}
