// HTTP to a service with one or more endpoints (etcd's gateway, the Kubernetes API, readiness
// gates). The protocol is native (netplug-http in the addon, ureq on rustls): connecting, TLS,
// framing and every request run on OS threads of their own, so a plugin process neither loads
// Node's socket and stream stack nor spends its JavaScript thread on TLS on a pod's path.
// Here: which endpoint to ask, in a rotating order like etcd's own client: a failure moves the
// client to the next endpoint, and the next request starts there.
import { AsyncLocalStorage } from 'node:async_hooks';

import { addon, type Binding } from '../native/addon.ts';

export interface TlsFiles {
  /** Trust exactly these certificates; without it, the platform's store. */
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

export interface HttpClientOptions {
  /** Each may carry a path prefix (`https://host/k8s/clusters/c-1`) that request paths follow. */
  endpoints: URL[];
  tls?: TlsFiles;
  /** An HTTP(S) proxy for every endpoint (see proxy.ts); none when absent. */
  proxy?: URL | undefined;
  connectTimeoutMs?: number;
  /** The deadline of each request as a whole, per endpoint tried. */
  requestTimeoutMs?: number;
  /** An answer that means "this endpoint cannot serve now, ask another" (etcd's 503, no leader). */
  unavailable?: (response: HttpResponse) => boolean;
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

/** TLS material the native agent cannot use: which part (`ca`, `cert`, `key`) and why. */
export class TlsMaterialError extends Error {
  override readonly name = 'TlsMaterialError';
  readonly part: 'ca' | 'cert' | 'key';

  constructor(part: 'ca' | 'cert' | 'key', message: string) {
    super(message);
    this.part = part;
  }
}

/** Set while work runs whose requests go ahead of those waiting (see urgently). */
const urgentScope = new AsyncLocalStorage<true>();

/**
 * Runs `work` with every request it makes put ahead of those already waiting for their
 * connection (after the one in flight and other urgent ones). For work that others wait on: a
 * node's IPAM turn in netplug-node shares connections with dozens of commands' reads, and would
 * otherwise queue behind them while every other ADD on the node waits for the turn.
 */
export function urgently<T>(work: () => Promise<T>): Promise<T> {
  return urgentScope.run(true, work);
}

/** A request waiting for the connection. */
interface Waiting {
  urgent: boolean;
  start(): void;
}

/** Failures after which another endpoint is asked: it may well answer. */
const FAILOVER_KINDS = new Set(['connect', 'timeout']);

export class HttpClient {
  private readonly options: HttpClientOptions;
  private readonly agent: Binding.HttpAgent;
  private endpoint = 0;
  private readonly waiting: Waiting[] = [];
  private busy = false;

  /** Throws TlsMaterialError for unusable TLS material now, not on the first request. */
  constructor(options: HttpClientOptions) {
    if (options.endpoints.length === 0) throw new Error('no endpoints');
    this.options = options;
    const tls = options.tls ?? {};
    try {
      this.agent = new (addon().HttpAgent)({
        ...(tls.ca ? { ca: tls.ca } : {}),
        ...(tls.cert ? { cert: tls.cert } : {}),
        ...(tls.key ? { key: tls.key } : {}),
        ...(options.proxy ? { proxy: options.proxy.href } : {}),
        connectTimeoutMs: options.connectTimeoutMs ?? 2_000,
        requestTimeoutMs: options.requestTimeoutMs ?? 10_000,
      });
    } catch (err) {
      const message = (err as Error).message;
      const part = /^(ca|cert|key): /.exec(message)?.[1] as TlsMaterialError['part'] | undefined;
      if (part) throw new TlsMaterialError(part, message.slice(part.length + 2));
      throw err;
    }
  }

  get current(): URL {
    return this.options.endpoints[this.endpoint] as URL;
  }

  /** One request at a time, so a kept-alive connection carries them in turn: in order, urgent ones first. */
  request(request: HttpRequest): Promise<HttpResponse> {
    return new Promise<HttpResponse>((resolve, reject) => {
      const start = () => {
        void this.send(request)
          .then(resolve, reject)
          .finally(() => this.startNext());
      };
      if (!this.busy) {
        this.busy = true;
        start();
        return;
      }
      const urgent = urgentScope.getStore() === true;
      const at = urgent ? this.waiting.findIndex((w) => !w.urgent) : -1;
      this.waiting.splice(at === -1 ? this.waiting.length : at, 0, { urgent, start });
    });
  }

  private startNext(): void {
    const next = this.waiting.shift();
    if (next) next.start();
    else this.busy = false;
  }

  /** Opens a connection to the current endpoint ahead of the first request (a cheap GET whose answer is dropped). */
  warmUp(path = '/version'): void {
    void this.request({ method: 'GET', path }).catch(() => undefined);
  }

  /** Nothing to release: idle connections close with the process or when the server drops them. */
  close(): void {}

  private async send(request: HttpRequest): Promise<HttpResponse> {
    const failures: string[] = [];
    let refused: HttpResponse | undefined;
    for (let tried = 0; tried < this.options.endpoints.length; tried++) {
      const url = this.current;
      const outcome = await this.agent.request({
        method: request.method,
        url: join(url, request.path),
        ...(request.headers ? { headers: request.headers } : {}),
        ...(request.body ? { body: request.body } : {}),
      });
      if (outcome.status !== undefined) {
        const response = {
          status: outcome.status,
          headers: new Map(Object.entries(outcome.headers ?? {})),
          body: outcome.body ?? Buffer.alloc(0),
          origin: url.origin,
        };
        if (!this.options.unavailable?.(response)) return response;
        refused = response;
        failures.push(`${url.origin}: status ${response.status}`);
      } else {
        const error = outcome.error ?? { kind: 'io', message: 'no response' };
        if (error.kind === 'tls') throw new HttpTlsError(`TLS with ${url.origin} failed: ${error.message}`);
        if (!FAILOVER_KINDS.has(error.kind))
          throw new HttpUnavailableError(`${url.origin} did not answer ${request.method} ${request.path}: ${error.message}`);
        failures.push(`${url.origin}: ${error.message}`);
      }
      this.endpoint = (this.endpoint + 1) % this.options.endpoints.length;
    }
    // Every endpoint said it cannot serve: the caller reads why from the last answer.
    if (refused) return refused;
    throw new HttpUnavailableError(`no endpoint could be reached (${failures.join('; ')})`);
  }
}

/** The endpoint's URL with its path prefix, then the request's path. */
export function join(endpoint: URL, path: string): string {
  return `${endpoint.origin}${endpoint.pathname.replace(/\/+$/, '')}${path.startsWith('/') ? path : `/${path}`}`;
}
