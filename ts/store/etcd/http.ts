// etcd's JSON gateway (POST a JSON body to /v3/kv/range or /v3/kv/txn, read a JSON answer) over
// the native HTTP client.
import { HttpClient, HttpTlsError, HttpUnavailableError, type HttpClientOptions, type HttpResponse } from '../../net/http-client.ts';
import { StoreError, StoreUnavailableError } from '../store.ts';

export type GatewayOptions = HttpClientOptions;

export class GatewayConnection {
  private readonly http: HttpClient;

  /** Throws TlsMaterialError (from net/http-client.ts) for unusable TLS material. */
  constructor(options: GatewayOptions) {
    this.http = new HttpClient(options);
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
      const unavailable = response.status === 503 || /no leader|timed out|unavailable/i.test(message ?? '');
      const Kind = unavailable ? StoreUnavailableError : StoreError;
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
