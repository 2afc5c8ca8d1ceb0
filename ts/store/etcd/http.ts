// A minimal HTTP/1.1 client for etcd's JSON gateway: POST a JSON body, read a JSON answer, over
// one kept-alive connection (TLS when the endpoint is https). Written here instead of using
// node:http because that client costs a plugin process some 10 ms to set up on every pod's path,
// against 2 ms for a socket; etcd answers with Content-Length-delimited JSON, which is all this
// reads (chunked answers are understood too).
import type { Socket } from 'node:net';

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

export class GatewayConnection {
  private readonly options: GatewayOptions;
  private socket: Socket | undefined;
  private endpoint = 0;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(options: GatewayOptions) {
    if (options.endpoints.length === 0) throw new StoreError('no etcd endpoints');
    this.options = options;
  }

  get current(): URL {
    return this.options.endpoints[this.endpoint] as URL;
  }

  /** POSTs `body` as JSON to `path`; one request at a time on the connection. */
  post(path: string, body: unknown): Promise<unknown> {
    const next = this.queue.then(() => this.send(path, body));
    this.queue = next.catch(() => undefined);
    return next;
  }

  close(): void {
    this.socket?.destroy();
    this.socket = undefined;
  }

  private async send(path: string, body: unknown): Promise<unknown> {
    const payload = Buffer.from(JSON.stringify(body));
    const socket = await this.connect();
    const url = this.current;
    const head = `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\n\r\n`;
    let response: Response;
    try {
      response = await exchange(socket, Buffer.concat([Buffer.from(head), payload]), this.options.requestTimeoutMs ?? 10_000);
    } catch (err) {
      this.close();
      throw new StoreUnavailableError(`etcd at ${url.origin} did not answer ${path}: ${(err as Error).message}`);
    }
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

  /** The open connection, or a new one to the first endpoint that accepts it. */
  private async connect(): Promise<Socket> {
    if (this.socket && !this.socket.destroyed) return this.socket;
    const failures: string[] = [];
    for (let tried = 0; tried < this.options.endpoints.length; tried++) {
      const url = this.current;
      try {
        this.socket = await open(url, this.options.tls, this.options.connectTimeoutMs ?? 2_000);
        return this.socket;
      } catch (err) {
        failures.push(`${url.origin}: ${(err as Error).message}`);
        this.endpoint = (this.endpoint + 1) % this.options.endpoints.length;
      }
    }
    throw new StoreUnavailableError(`no etcd endpoint could be reached (${failures.join('; ')})`);
  }
}

function open(url: URL, tls: TlsFiles | undefined, timeoutMs: number): Promise<Socket> {
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    let socket: Socket;
    const done = (err?: Error) => {
      clearTimeout(timer);
      if (err) {
        socket.destroy();
        reject(err);
      } else {
        socket.removeAllListeners('error');
        socket.on('error', () => {}); // surfaced by the next exchange
        socket.setNoDelay(true);
        resolve(socket);
      }
    };
    const timer = setTimeout(() => done(new Error(`no connection within ${timeoutMs} ms`)), timeoutMs);
    if (url.protocol === 'https:') {
      const { connect } = process.getBuiltinModule('node:tls');
      const servername = /^[\d.]+$|:/.test(host) ? undefined : host;
      socket = connect({ host, port, ...tls, ...(servername ? { servername } : {}) }, () => done());
    } else {
      const { connect } = process.getBuiltinModule('node:net');
      socket = connect({ host, port }, () => done());
    }
    socket.once('error', (err) => done(err));
  });
}

/** Writes one request and reads its whole response. */
function exchange(socket: Socket, request: Buffer, timeoutMs: number): Promise<Response> {
  return new Promise((resolve, reject) => {
    let received = Buffer.alloc(0);
    const finish = (err: Error | undefined, response?: Response) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      socket.unref();
      if (err) reject(err);
      else resolve(response as Response);
    };
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      try {
        const response = parseResponse(received);
        if (response) finish(undefined, response);
      } catch (err) {
        finish(err as Error);
      }
    };
    const onError = (err: Error) => finish(err);
    const onClose = () => finish(new Error('connection closed'));
    const timer = setTimeout(() => finish(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    socket.ref();
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);
    socket.write(request);
  });
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
