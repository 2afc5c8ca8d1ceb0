// etcd's JSON gateway over HTTP/1.1: POST a JSON body, read a JSON answer, on one kept-alive
// connection per endpoint (TLS when the endpoint is https). The connection itself is native
// (netplug-http in the addon): connecting, the TLS handshake and every exchange run on OS threads
// of their own, so a plugin process neither loads Node's socket and stream stack nor spends its
// JavaScript thread on TLS on a pod's path. Requests are built and responses parsed here.
import { addon, type Binding } from '../../native/addon.ts';
import { StoreError, StoreUnavailableError } from '../store.ts';

export interface TlsFiles {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

export interface GatewayOptions {
  endpoints: URL[];
  tls?: TlsFiles;
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
}

interface Response {
  status: number;
  body: Buffer;
}

/** TLS material the native connection refused: which part (`ca`, `cert`, `key`) and why. */
export class TlsMaterialError extends StoreError {
  readonly part: 'ca' | 'cert' | 'key';

  constructor(part: 'ca' | 'cert' | 'key', message: string) {
    super(message);
    this.part = part;
  }
}

export class GatewayConnection {
  private readonly options: GatewayOptions;
  private readonly connections = new Map<number, Binding.HttpConnection>();
  private endpoint = 0;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(options: GatewayOptions) {
    if (options.endpoints.length === 0) throw new StoreError('no etcd endpoints');
    this.options = options;
    this.connection(0); // refuses unusable TLS material now, not on the first request
  }

  get current(): URL {
    return this.options.endpoints[this.endpoint] as URL;
  }

  /** POSTs `body` as JSON to `path`; one request at a time. */
  post(path: string, body: unknown): Promise<unknown> {
    const next = this.queue.then(() => this.send(path, body));
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Starts connecting to the current endpoint; a failure surfaces on the first request. */
  warmUp(): void {
    try {
      void this.connection(this.endpoint).connect();
    } catch {
      // Unusable TLS material for this endpoint: the first request reports it.
    }
  }

  close(): void {
    for (const connection of this.connections.values()) connection.close();
  }

  private async send(path: string, body: unknown): Promise<unknown> {
    const payload = Buffer.from(JSON.stringify(body));
    const failures: string[] = [];
    // Endpoints in turn from the current one, while they refuse connections.
    for (let tried = 0; tried < this.options.endpoints.length; tried++) {
      const url = this.current;
      const head = `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\n\r\n`;
      const outcome = await this.connection(this.endpoint).exchange(Buffer.concat([Buffer.from(head), payload]));
      if (outcome.response) return interpret(url, path, outcome.response);
      const error = outcome.error ?? { kind: 'io', message: 'no response' };
      // A certificate etcd's TLS refuses is a setting to fix, not a moment to wait out.
      if (error.kind === 'tls') throw new StoreError(`TLS with etcd at ${url.origin} failed: ${error.message}`);
      if (error.kind !== 'connect') throw new StoreUnavailableError(`etcd at ${url.origin} did not answer ${path}: ${error.message}`);
      failures.push(`${url.origin}: ${error.message}`);
      this.endpoint = (this.endpoint + 1) % this.options.endpoints.length;
    }
    throw new StoreUnavailableError(`no etcd endpoint could be reached (${failures.join('; ')})`);
  }

  private connection(index: number): Binding.HttpConnection {
    let connection = this.connections.get(index);
    if (!connection) {
      const url = this.options.endpoints[index] as URL;
      const secure = url.protocol === 'https:';
      const tls = this.options.tls ?? {};
      try {
        connection = new (addon().HttpConnection)({
          host: url.hostname.replace(/^\[|\]$/g, ''),
          port: Number(url.port || (secure ? 443 : 80)),
          tls: secure,
          ...(tls.ca ? { ca: tls.ca } : {}),
          ...(tls.cert ? { cert: tls.cert } : {}),
          ...(tls.key ? { key: tls.key } : {}),
          connectTimeoutMs: this.options.connectTimeoutMs ?? 2_000,
          requestTimeoutMs: this.options.requestTimeoutMs ?? 10_000,
        });
      } catch (err) {
        const message = (err as Error).message;
        const part = /^(ca|cert|key): /.exec(message)?.[1] as 'ca' | 'cert' | 'key' | undefined;
        if (part) throw new TlsMaterialError(part, message.slice(part.length + 2));
        throw err;
      }
      this.connections.set(index, connection);
    }
    return connection;
  }
}

function interpret(url: URL, path: string, data: Buffer): unknown {
  const response = parseResponse(data);
  if (!response) throw new StoreError(`etcd at ${url.origin} answered ${path} with an incomplete response`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(response.body.toString('utf8'));
  } catch {
    throw new StoreError(`etcd at ${url.origin} answered ${path} with status ${response.status} and no JSON`);
  }
  if (response.status !== 200) {
    const message = (parsed as { message?: string; error?: string }).message ?? (parsed as { error?: string }).error;
    const unavailable = response.status === 503 || /no leader|timed out|unavailable/i.test(message ?? '');
    const Kind = unavailable ? StoreUnavailableError : StoreError;
    throw new Kind(`etcd at ${url.origin} refused ${path} (${response.status}): ${message ?? 'no message'}`);
  }
  return parsed;
}

/** The response in `data`, or undefined while more bytes are needed. */
export function parseResponse(data: Buffer): Response | undefined {
  const headerEnd = data.indexOf('\r\n\r\n');
  if (headerEnd < 0) return undefined;
  const [statusLine = '', ...headerLines] = data.subarray(0, headerEnd).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]);
  if (!status) throw new Error(`not an HTTP response: ${statusLine.slice(0, 60)}`);
  const headers = new Map(headerLines.map((line) => [line.slice(0, line.indexOf(':')).trim().toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  const body = data.subarray(headerEnd + 4);
  const length = headers.get('content-length');
  if (length !== undefined) {
    return body.length >= Number(length) ? { status, body: body.subarray(0, Number(length)) } : undefined;
  }
  if (headers.get('transfer-encoding')?.toLowerCase() === 'chunked') return dechunk(status, body);
  throw new Error('a response with neither Content-Length nor chunked encoding');
}

function dechunk(status: number, data: Buffer): Response | undefined {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', offset);
    if (lineEnd < 0) return undefined;
    const size = Number.parseInt(data.subarray(offset, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) throw new Error('malformed chunked response');
    if (size === 0) return data.length >= lineEnd + 4 ? { status, body: Buffer.concat(parts) } : undefined;
    if (data.length < lineEnd + 2 + size + 2) return undefined;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
}
