// etcd's JSON gateway (POST a JSON body to /v3/kv/range or /v3/kv/txn, read a JSON answer) over
// the native HTTP client. Like etcd's own client, every endpoint is used: one that refuses, times
// out, answers 503 or says it has no leader hands the request to the next, and the next request
// starts there. No proxy: etcd is a cluster-internal service a node reaches directly.
// A transaction sent again to another member after a timeout is safe: every write netplug makes
// is a compare-and-swap, so one the first member did apply fails its comparison the second time
// and the caller re-reads, as after any conflict.
import { HttpClient, HttpTlsError, HttpUnavailableError, type HttpClientOptions, type HttpResponse } from '../../net/http-client.ts';
import { StoreError, StoreUnavailableError } from '../store.ts';

export type GatewayOptions = HttpClientOptions;

export class GatewayConnection {
  private readonly http: HttpClient;

  /** Throws TlsMaterialError (from net/http-client.ts) for unusable TLS material. */
  constructor(options: GatewayOptions) {
    // Every datastore call has a deadline: 10 s per endpoint tried unless the options say otherwise.
    this.http = new HttpClient({ requestTimeoutMs: 10_000, ...options, unavailable: memberUnavailable });
  }

  get current(): URL {
    return this.http.current;
  }

  async post(path: string, body: unknown): Promise<unknown> {
    let response: HttpResponse;
    try {
      response = await this.http.request({
        method: 'POST',
        path,
        headers: { 'Content-Type': 'application/json' },
        body: Buffer.from(JSON.stringify(body)),
      });
    } catch (err) {
      // A certificate etcd's TLS refuses is a setting to fix, not a moment to wait out.
      if (err instanceof HttpTlsError) throw new StoreError(err.message.replace(/^TLS with /, 'TLS with etcd at '));
      if (err instanceof HttpUnavailableError)
        throw new StoreUnavailableError(err.message.replace(/^no endpoint/, 'no etcd endpoint').replace(/^(https?:)/, 'etcd at $1'));
      throw err;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(response.body.toString('utf8'));
    } catch {
      throw new StoreError(`etcd at ${response.origin} answered ${path} with status ${response.status} and no JSON`);
    }
    if (response.status !== 200) {
      const message = (parsed as { message?: string; error?: string }).message ?? (parsed as { error?: string }).error;
      const Kind = memberUnavailable(response) ? StoreUnavailableError : StoreError;
      throw new Kind(`etcd at ${response.origin} refused ${path} (${response.status}): ${message ?? 'no message'}`);
    }
    return parsed;
  }

  warmUp(): void {
    this.http.warmUp();
  }

  close(): void {
    this.http.close();
  }
}

/** An answer by which an etcd member says it cannot serve now (no leader, stopping, overloaded). */
function memberUnavailable(response: HttpResponse): boolean {
  if (response.status === 503) return true;
  if (response.status < 500) return false;
  return /no leader|timed out|unavailable|stopped/i.test(response.body.toString('utf8'));
}
