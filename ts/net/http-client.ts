// HTTP/1.1 to a service with one or more endpoints (etcd's gateway, the Kubernetes API, readiness
// gates): one kept-alive connection per endpoint, TLS for https, failover to the next endpoint
// while one refuses connections. The connection itself is native (netplug-http in the addon):
// connecting, the TLS handshake and every exchange run on OS threads of their own, so a plugin
// process neither loads Node's socket and stream stack nor spends its JavaScript thread on TLS on
// a pod's path. Requests are built and responses parsed here.
import { addon, type Binding } from '../native/addon.ts';

export interface TlsFiles {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

export interface HttpClientOptions {
  endpoints: URL[];
  tls?: TlsFiles;
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
}

export interface HttpRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
}

export interface HttpResponse {
  status: number;
  /** Header names lower-cased. */
  headers: Map<string, string>;
  body: Buffer;
  /** The endpoint that answered. */
  origin: string;
}

/** No answer: every endpoint refused, or one broke off or took too long. */
export class HttpUnavailableError extends Error {
  override readonly name = 'HttpUnavailableError';
}

/** The TLS session failed: a certificate refused either way (a setting to fix, not an outage). */
export class HttpTlsError extends Error {
  override readonly name = 'HttpTlsError';
}

/** TLS material the native connection cannot use: which part (`ca`, `cert`, `key`) and why. */
export class TlsMaterialError extends Error {
  override readonly name = 'TlsMaterialError';
  readonly part: 'ca' | 'cert' | 'key';

  constructor(part: 'ca' | 'cert' | 'key', message: string) {
    super(message);
    this.part = part;
  }
}

export class HttpClient {
  private readonly options: HttpClientOptions;
  private readonly connections = new Map<number, Binding.HttpConnection>();
  private endpoint = 0;
  private queue: Promise<unknown> = Promise.resolve();

  /** Throws TlsMaterialError for unusable TLS material now, not on the first request. */
  constructor(options: HttpClientOptions) {
    if (options.endpoints.length === 0) throw new Error('no endpoints');
    this.options = options;
    this.connection(0);
  }

  get current(): URL {
    return this.options.endpoints[this.endpoint] as URL;
  }

  /** One request at a time, as a single connection carries them. */
  request(request: HttpRequest): Promise<HttpResponse> {
    const next = this.queue.then(() => this.send(request));
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

  private async send(request: HttpRequest): Promise<HttpResponse> {
    const failures: string[] = [];
    // Endpoints in turn from the current one, while they refuse connections.
    for (let tried = 0; tried < this.options.endpoints.length; tried++) {
      const url = this.current;
      const outcome = await this.connection(this.endpoint).exchange(encode(url, request));
      if (outcome.response) {
        const response = parseResponse(outcome.response);
        if (!response)
          throw new HttpUnavailableError(`${url.origin} answered ${request.method} ${request.path} with an incomplete response`);
        return { ...response, origin: url.origin };
      }
      const error = outcome.error ?? { kind: 'io', message: 'no response' };
      if (error.kind === 'tls') throw new HttpTlsError(`TLS with ${url.origin} failed: ${error.message}`);
      if (error.kind !== 'connect')
        throw new HttpUnavailableError(`${url.origin} did not answer ${request.method} ${request.path}: ${error.message}`);
      failures.push(`${url.origin}: ${error.message}`);
      this.endpoint = (this.endpoint + 1) % this.options.endpoints.length;
    }
    throw new HttpUnavailableError(`no endpoint could be reached (${failures.join('; ')})`);
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

function encode(url: URL, request: HttpRequest): Buffer {
  const body = request.body ?? Buffer.alloc(0);
  const headers = {
    Host: url.host,
    ...request.headers,
    ...(request.body || request.method !== 'GET' ? { 'Content-Length': String(body.length) } : {}),
  };
  const head = `${request.method} ${request.path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n`;
  return Buffer.concat([Buffer.from(head), body]);
}

/** The response in `data`, or undefined while more bytes are needed. */
export function parseResponse(data: Buffer): Omit<HttpResponse, 'origin'> | undefined {
  const headerEnd = data.indexOf('\r\n\r\n');
  if (headerEnd < 0) return undefined;
  const [statusLine = '', ...headerLines] = data.subarray(0, headerEnd).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]);
  if (!status) throw new Error(`not an HTTP response: ${statusLine.slice(0, 60)}`);
  const headers = new Map(
    headerLines.map((line) => [line.slice(0, line.indexOf(':')).trim().toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
  );
  const body = data.subarray(headerEnd + 4);
  const length = headers.get('content-length');
  if (length !== undefined) {
    return body.length >= Number(length) ? { status, headers, body: body.subarray(0, Number(length)) } : undefined;
  }
  if (headers.get('transfer-encoding')?.toLowerCase() === 'chunked') {
    const dechunked = dechunk(body);
    return dechunked && { status, headers, body: dechunked };
  }
  throw new Error('a response with neither Content-Length nor chunked encoding');
}

function dechunk(data: Buffer): Buffer | undefined {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', offset);
    if (lineEnd < 0) return undefined;
    const size = Number.parseInt(data.subarray(offset, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) throw new Error('malformed chunked response');
    if (size === 0) return data.length >= lineEnd + 4 ? Buffer.concat(parts) : undefined;
    if (data.length < lineEnd + 2 + size + 2) return undefined;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
}
