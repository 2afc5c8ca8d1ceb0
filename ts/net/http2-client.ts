// HTTP/2 to one HTTPS endpoint (the Kubernetes API), for a resident program: one connection
// carries every request at once, so a commit's writes, a node's IPAM turn and dozens of commands'
// reads do not queue behind each other as they do on HTTP/1.1 connections (http-client.ts), and
// a node keeps one connection to the API instead of one per concurrent request. Node's own http2
// module frames the protocol; the one-shot plugin keeps the native client (its start-up is on
// every pod's path, and it makes a few requests one after another).
import { connect, constants, type ClientHttp2Session, type SecureClientSessionOptions } from 'node:http2';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';

import { HttpTlsError, HttpUnavailableError, TlsMaterialError, type HttpRequest, type HttpResponse, type TlsFiles } from './http-client.ts';

export interface Http2ClientOptions {
  endpoint: URL;
  tls?: TlsFiles;
  connectTimeoutMs?: number;
  /** The deadline of each request as a whole (10 s unless given). */
  requestTimeoutMs?: number;
}

/** Errors of the TLS session (a certificate refused): a setting to fix, not an outage. */
const TLS_ERROR = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL|ERR_OSSL|HOSTNAME|ALTNAME/;

export class Http2Client {
  private readonly options: Http2ClientOptions;
  private session: ClientHttp2Session | undefined;

  /** Throws TlsMaterialError for unusable TLS material now, not on the first request. */
  constructor(options: Http2ClientOptions) {
    if (options.endpoint.protocol !== 'https:') throw new Error(`HTTP/2 is used over TLS only, not ${options.endpoint.protocol}`);
    checkMaterial(options.tls ?? {});
    this.options = options;
  }

  request(request: HttpRequest): Promise<HttpResponse> {
    const origin = this.options.endpoint.origin;
    return new Promise<HttpResponse>((resolve, reject) => {
      let session: ClientHttp2Session;
      try {
        session = this.connected();
      } catch (err) {
        reject(new HttpUnavailableError(`${origin}: ${(err as Error).message}`));
        return;
      }
      const path = `${this.options.endpoint.pathname.replace(/\/+$/, '')}${request.path}`;
      const stream = session.request(
        {
          [constants.HTTP2_HEADER_METHOD]: request.method,
          [constants.HTTP2_HEADER_PATH]: path,
          ...Object.fromEntries(Object.entries(request.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value])),
        },
        // Node would end a DELETE's stream at once, as a GET's; the API takes its options in a body.
        { endStream: request.body === undefined },
      );
      let status = 0;
      const headers = new Map<string, string>();
      const chunks: Buffer[] = [];
      const fail = (err: Error) => {
        // A stream the session's failure cancelled carries that failure as its cause.
        const cause = (err as { cause?: NodeJS.ErrnoException }).cause;
        const code = `${(err as NodeJS.ErrnoException).code ?? ''} ${cause?.code ?? ''}`;
        reject(
          TLS_ERROR.test(code)
            ? new HttpTlsError(`TLS with ${origin} failed: ${(cause ?? err).message}`)
            : new HttpUnavailableError(`${origin} did not answer ${request.method} ${request.path}: ${(cause ?? err).message}`),
        );
      };
      const deadlineMs = this.options.requestTimeoutMs ?? 10_000;
      const deadline = setTimeout(() => {
        stream.close(constants.NGHTTP2_CANCEL);
        fail(new Error(`no answer within ${deadlineMs / 1000} s`));
      }, deadlineMs);
      // Whatever ends the stream settles the request (later settlements are no-ops): a stream
      // reset without an error would otherwise leave it waiting for nothing.
      stream.on('close', () => {
        clearTimeout(deadline);
        fail(new Error(`the stream closed before its answer ended (HTTP/2 code ${stream.rstCode})`));
      });
      stream.on('response', (answer) => {
        status = Number(answer[constants.HTTP2_HEADER_STATUS]);
        for (const [name, value] of Object.entries(answer))
          if (!name.startsWith(':') && value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : String(value));
      });
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => resolve({ status, headers, body: Buffer.concat(chunks), origin }));
      stream.on('error', fail);
      if (request.body !== undefined) stream.end(request.body);
    });
  }

  /** Opens the connection ahead of the first request (a cheap GET whose answer is dropped). */
  warmUp(path = '/version'): void {
    void this.request({ method: 'GET', path }).catch(() => undefined);
  }

  close(): void {
    this.session?.close();
    this.session = undefined;
  }

  /** The open session, else a new one; one that ends or fails is dropped, and the next request opens another. */
  private connected(): ClientHttp2Session {
    if (this.session && !this.session.closed && !this.session.destroyed) return this.session;
    const { tls = {}, endpoint } = this.options;
    const options: SecureClientSessionOptions = {
      ...(tls.ca ? { ca: tls.ca } : {}),
      ...(tls.cert ? { cert: tls.cert } : {}),
      ...(tls.key ? { key: tls.key } : {}),
    };
    const session = connect(endpoint.origin, options);
    const drop = () => {
      if (this.session === session) this.session = undefined;
    };
    // A failure reaches the requests in flight through their streams; the session is only dropped.
    session.on('error', drop);
    session.on('goaway', drop);
    session.on('close', drop);
    session.setTimeout(this.options.connectTimeoutMs ?? 2_000, () => {
      if (!session.connecting) return;
      session.destroy(new Error(`no connection within ${(this.options.connectTimeoutMs ?? 2_000) / 1000} s`));
    });
    // Idle, the connection does not keep a process alive.
    session.unref();
    this.session = session;
    return session;
  }
}

/** Each part of `tls` parsed alone, then the key with its certificate: the first refused is named. */
function checkMaterial({ ca, cert, key }: TlsFiles): void {
  const tries: [TlsMaterialError['part'], () => unknown][] = [];
  if (ca) tries.push(['ca', () => new X509Certificate(ca)]);
  if (cert) tries.push(['cert', () => new X509Certificate(cert)]);
  if (key) tries.push(['key', () => createPrivateKey(key)]);
  if (cert && key) tries.push(['key', () => createSecureContext({ cert, key })]);
  for (const [part, load] of tries) {
    try {
      load();
    } catch (err) {
      throw new TlsMaterialError(part, (err as Error).message);
    }
  }
}

/** KubeClientOptions.multiplexWith for the resident programs. */
export const openHttp2 = (options: Http2ClientOptions): Http2Client => new Http2Client(options);
