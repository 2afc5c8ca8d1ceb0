// etcd's v3 key-value API over gRPC (the etcd3 package), for the resident programs (netplug-node).
// etcd serves gRPC natively and translates every JSON gateway request into it: on loopback here a
// turn's transaction takes 1.0 ms over gRPC against 2.0 ms through the gateway, and a three-key
// read 1.8 against 3.7 ms. A resident program pays grpc-js's load once; the one-shot plugin keeps
// the gateway client (client.ts), whose start-up costs every pod's ADD nothing.
//
// Every endpoint is used, as with the gateway: a request that cannot reach one member (refused,
// timed out, unavailable) is sent to another, up to three tries. A transaction sent again is safe:
// every write netplug makes is a compare-and-swap (see http.ts).
import { Etcd3, GRPCDeadlineExceededError, isRecoverableError, type IOptions, type Watcher } from 'etcd3';
import type { IKeyValue, IRangeRequest, IRequestOp } from 'etcd3';

import { StoreError, StoreUnavailableError, type Store } from '../store.ts';
import { prefixEnd, type Compare, type KeyValue, type KvClient, type Operation, type PrefixEvents, type RangeRequest } from './client.ts';
import type { GatewayOptions } from './http.ts';
import { gatewayOptions, type EtcdSettings } from './options.ts';
import { EtcdStore } from './store.ts';

/** The deadline of each request, as the gateway's (http.ts). */
const REQUEST_TIMEOUT_MS = 10_000;
/** Pings while a call is open, and how long one may go unanswered (see the constructor). */
const KEEPALIVE_TIME_MS = 30_000;
const KEEPALIVE_TIMEOUT_MS = 10_000;
const DIAL_TIMEOUT_MS = 2_000;
/** After a failed watch, the next list and watch: soon, then less often while it keeps failing. */
const FIRST_RETRY_MS = 500;
const LAST_RETRY_MS = 30_000;

/** The request deadline and keepalive above; a test shortens them so as not to wait tens of seconds. */
type GrpcTiming = { requestTimeoutMs?: number; keepaliveTimeMs?: number; keepaliveTimeoutMs?: number };

/**
 * A policy that runs the call as it is: no circuit breaker holding a member back after it
 * recovers. Async, so that what the call throws is a rejection (etcd3 reports failures by throwing
 * into its policy and catching the promise).
 */
const direct = { execute: async <T>(fn: (context: unknown) => PromiseLike<T> | T) => fn({}) };

class GrpcKvClient implements KvClient {
  readonly origin: string;
  requests = 0;
  private readonly etcd: Etcd3;
  private readonly endpoints: string;

  /** The endpoints and TLS material as the gateway's options give them (options.ts checked them). */
  constructor(options: GatewayOptions, timing: GrpcTiming = {}) {
    const {
      requestTimeoutMs = REQUEST_TIMEOUT_MS,
      keepaliveTimeMs = KEEPALIVE_TIME_MS,
      keepaliveTimeoutMs = KEEPALIVE_TIMEOUT_MS,
    } = timing;
    this.origin = options.endpoints[0]?.origin ?? '';
    this.endpoints = options.endpoints.map((url) => url.origin).join(', ');
    const tls = options.tls;
    if (tls) quietServerNameWarning();
    const settings: IOptions = {
      hosts: options.endpoints.map((url) => url.origin),
      dialTimeout: DIAL_TIMEOUT_MS,
      // grpc-js refuses answers over 4 MiB by default; a list of a large cluster's blocks is more
      // (a /26 block with its attributes is some 13 kB), and the gateway's client sets no limit.
      // Pings every 30 s while a call is open (a watch always is): a connection the network dropped
      // silently is found within 40 s, not after TCP's retransmissions (many minutes), and the
      // follower lists again. etcd refuses pings more often than every 5 s.
      grpcOptions: {
        'grpc.max_receive_message_length': -1,
        'grpc.keepalive_time_ms': keepaliveTimeMs,
        'grpc.keepalive_timeout_ms': keepaliveTimeoutMs,
      },
      // A request's deadline, not a watch's: a watch stream is open for as long as the agent runs,
      // and with a deadline it failed every 10 s and the follower listed everything again.
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + requestTimeoutMs }),
      faultHandling: { host: () => direct as never },
      ...(tls
        ? {
            // Without a bundle, grpc-js trusts the platform's roots, as the gateway's client does.
            credentials: {
              rootCertificate: tls.ca as Buffer,
              ...(tls.key ? { privateKey: tls.key } : {}),
              ...(tls.cert ? { certChain: tls.cert } : {}),
            },
          }
        : {}),
    };
    this.etcd = new Etcd3(settings);
  }

  async range(key: string, options: { prefix?: boolean; keysOnly?: boolean } = {}): Promise<KeyValue[]> {
    const answer = await this.call(() => this.etcd.kv.range(rangeRequest({ key, ...options })));
    return answer.kvs.map(keyValue);
  }

  async ranges(requests: readonly RangeRequest[]): Promise<KeyValue[][]> {
    const answer = await this.call(() => this.etcd.kv.txn({ success: requests.map((r) => ({ request_range: rangeRequest(r) })) }));
    return requests.map((_, i) => (answer.responses[i]?.response_range?.kvs ?? []).map(keyValue));
  }

  async txnElseRange(
    compare: readonly Compare[],
    success: readonly Operation[],
    failure: readonly RangeRequest[],
    failurePuts: readonly Operation[] = [],
  ): Promise<{ succeeded: boolean; ranges: KeyValue[][]; revision: string }> {
    const answer = await this.call(() =>
      this.etcd.kv.txn({
        compare: compare.map((c) =>
          c.target === 'VERSION'
            ? { key: Buffer.from(c.key), target: 'Version', result: 'Equal', version: c.version }
            : { key: Buffer.from(c.key), target: 'Mod', result: 'Equal', mod_revision: c.modRevision },
        ),
        success: success.map(requestOp),
        // The puts first, so that the ranges see them.
        failure: [...failurePuts.map(requestOp), ...failure.map((r) => ({ request_range: rangeRequest(r) }))],
      }),
    );
    const first = failurePuts.length;
    return {
      succeeded: answer.succeeded,
      revision: answer.header.revision,
      ranges: answer.succeeded ? [] : failure.map((_, i) => (answer.responses[first + i]?.response_range?.kvs ?? []).map(keyValue)),
    };
  }

  /**
   * The keys under `prefix` at one revision, then every change after it from etcd's watch. A lost
   * connection, a watch etcd cancels (its history compacted) and any failure to list or watch are
   * reported, and the prefix listed and watched again, with a growing delay.
   */
  watchPrefix(prefix: string, events: PrefixEvents): { stop(): void } {
    let stopped = false;
    let watcher: Watcher | undefined;
    let retry: NodeJS.Timeout | undefined;
    let delay = FIRST_RETRY_MS;
    const fail = (err: Error) => {
      if (stopped) return;
      void watcher?.cancel().catch(() => undefined);
      watcher = undefined;
      events.failed(this.storeError(err));
      retry = setTimeout(() => void start(), delay);
      delay = Math.min(delay * 2, LAST_RETRY_MS);
    };
    const start = async () => {
      try {
        const listed = await this.call(() => this.etcd.kv.range(rangeRequest({ key: prefix, prefix: true })));
        const after = (BigInt(listed.header.revision) + 1n).toString();
        const created = await this.etcd.watch().prefix(prefix).startRevision(after).create();
        if (stopped) return void created.cancel().catch(() => undefined);
        // In one turn of the event loop: the list before any change the watch delivers.
        watcher = created;
        events.listed(listed.kvs.map(keyValue));
        // Only the current watcher speaks: one given up (an error, then its disconnect) stays silent,
        // or a second retry would start a second watch.
        const mine = () => watcher === created;
        created.on('put', (kv: IKeyValue) => mine() && events.put(keyValue(kv)));
        created.on('delete', (kv: IKeyValue) => mine() && events.deleted(kv.key.toString('utf8')));
        created.on('error', (err: Error) => mine() && fail(err));
        // etcd3 would resume by itself; listed afresh instead, the follower knows it was out of step meanwhile.
        created.on('disconnected', (err: Error) => mine() && fail(err));
        delay = FIRST_RETRY_MS;
      } catch (err) {
        fail(err as Error);
      }
    };
    void start();
    return {
      stop: () => {
        if (stopped) return;
        stopped = true;
        clearTimeout(retry);
        void watcher?.cancel().catch(() => undefined);
        watcher = undefined;
      },
    };
  }

  /** Connects on the first request (grpc-js connects lazily and keeps the channel). */
  warmUp(): void {}

  close(): void {
    this.etcd.close();
  }

  private async call<T>(request: () => Promise<T>): Promise<T> {
    this.requests++;
    try {
      return await request();
    } catch (err) {
      throw this.storeError(err as Error);
    }
  }

  /** As the gateway's client reports them: an outage is "try again later", TLS a setting to fix. */
  private storeError(err: Error): Error {
    const detail = describe(err.message);
    if (/certificate|SSL|TLS|handshake/i.test(detail)) return new StoreError(`TLS with etcd at ${this.endpoints} failed: ${detail}`);
    if (isRecoverableError(err) || err instanceof GRPCDeadlineExceededError)
      return new StoreUnavailableError(`no etcd endpoint could be reached (${this.endpoints}): ${detail}`);
    return new StoreError(`etcd at ${this.endpoints} refused the request: ${detail}`);
  }
}

/**
 * grpc-js gives an IP endpoint as the TLS server name, and Node then warns once (DEP0123) that it
 * ignores it: about grpc-js, nothing an operator can change, so left out of the agent's log.
 */
function quietServerNameWarning(): void {
  if (quieted) return;
  quieted = true;
  const emit = process.emitWarning.bind(process) as (...args: unknown[]) => void;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const code = typeof rest[0] === 'object' ? (rest[0] as { code?: string } | null)?.code : rest[1];
    if (code !== 'DEP0123') emit(warning, ...rest);
  }) as typeof process.emitWarning;
}
let quieted = false;

/** grpc-js's message without its framing: `14 UNAVAILABLE: No connection established. Last error: …`. */
function describe(message: string): string {
  const alert = /ssl\/tls alert ([a-z ]+?):/i.exec(message);
  if (alert) return `the server sent TLS alert "${alert[1]}"`;
  return message
    .replace(/^\d+ [A-Z_]+: /, '')
    .replace(/No connection established\. Last error: (Error: )?/, '')
    .replace(/\s*\(\d{4}-\d\d-\d\dT[^)]*\)/, '')
    .replace(/\.? Resolution note:.*$/s, '')
    .trim();
}

function rangeRequest(request: RangeRequest): IRangeRequest {
  return {
    key: Buffer.from(request.key),
    ...(request.prefix ? { range_end: prefixEnd(request.key) } : {}),
    ...(request.keysOnly ? { keys_only: true } : {}),
  };
}

function requestOp(o: Operation): IRequestOp {
  return 'put' in o
    ? { request_put: { key: Buffer.from(o.put.key), value: o.put.value } }
    : { request_delete_range: { key: Buffer.from(o.delete.key) } };
}

function keyValue(kv: IKeyValue): KeyValue {
  return { key: kv.key.toString('utf8'), value: kv.value, modRevision: kv.mod_revision, version: kv.version };
}

/** The etcd datastore over gRPC, for the settings the gateway's client would take (options.ts). */
export async function openGrpcStore(settings: EtcdSettings, timing: GrpcTiming = {}): Promise<Store> {
  return new EtcdStore(new GrpcKvClient(await gatewayOptions(settings), timing));
}
