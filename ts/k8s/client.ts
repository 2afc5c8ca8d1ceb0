// The Kubernetes API as netplug uses it: JSON over the native HTTP client, under the server's
// path prefix, with the kubeconfig's credentials (credentials.ts): a bearer token, a client
// certificate, or what an exec plugin returned. A 401 renews the credential (the token file read
// again, the exec plugin run again) and retries once. Failures name the server and, for a
// refusal, what netplug's identity lacks.
import {
  HttpClient,
  HttpTlsError,
  HttpUnavailableError,
  TlsMaterialError,
  type HttpRequest,
  type HttpResponse,
  type TlsFiles,
} from '../net/http-client.ts';
import { proxyFor } from '../net/proxy.ts';
import type { Credential } from './credentials.ts';
import { KubeError, KubeSettingsError, KubeUnavailableError } from './errors.ts';
import { apiAccess, serverText, type ApiAccess, type KubernetesSettings } from './kubeconfig.ts';

export { KubeError, KubeUnavailableError } from './errors.ts';

interface Status {
  message?: string;
  reason?: string;
}

/** One connection to the API: the native HTTP/1.1 client, or what KubeClientOptions.multiplexWith opens. */
export type ApiConnection = Pick<HttpClient, 'request' | 'warmUp' | 'close'>;

export interface KubeClientOptions {
  /**
   * Opens one connection that carries every request at once (ts/net/http2-client.ts), used unless
   * a proxy applies or the server is plain HTTP. Given by the resident programs only: the one-shot
   * plugin does not load Node's HTTP/2 stack on its start-up (about 20 ms).
   */
  multiplexWith?: (options: { endpoint: URL; tls: TlsFiles; requestTimeoutMs: number }) => ApiConnection;
}

const TLS_PARTS = { ca: 'certificate authority', cert: 'client certificate', key: 'client key' } as const;

export class KubeClient {
  readonly access: ApiAccess;
  /** The connection, for the client certificate it presents. */
  private http: ApiConnection | undefined;
  private httpCert: Buffer | undefined;
  /** Connections left when an exec plugin's certificate changed, closed with the client. */
  private readonly retired: ApiConnection[] = [];
  /** The opener of a multiplexed connection, where one applies: not through a proxy, nor to plain HTTP. */
  private readonly multiplexWith: KubeClientOptions['multiplexWith'];
  /** The server's path prefix ("" for none), put before every request path. */
  private readonly prefix: string;
  /** The server without its prefix: the HTTP layer is given whole paths. */
  private readonly endpoint: URL;
  /** Requests sent, for the benchmarks' count of API round trips. */
  requests = 0;

  constructor(access: ApiAccess, { multiplexWith }: KubeClientOptions = {}) {
    this.access = access;
    const direct = access.server.protocol === 'https:' && proxyOf(new URL(access.server.origin)) === undefined;
    this.multiplexWith = direct ? multiplexWith : undefined;
    this.prefix = access.server.pathname === '/' ? '' : access.server.pathname;
    this.endpoint = new URL(access.server.origin);
    // A fixed identity connects now, so that unusable TLS material is reported before any request.
    if (!access.credentials.suppliesCertificates) this.connection({});
  }

  /** Requests go at once over one connection (KubeClientOptions.multiplexWith), not one at a time. */
  get multiplexed(): boolean {
    return this.multiplexWith !== undefined;
  }

  /** The API's URL for messages: origin and path prefix. */
  get server(): string {
    return serverText(this.access.server);
  }

  /**
   * GET `path`; undefined for 404. `needs` says what a refusal (403) means netplug's identity
   * lacks, for the message.
   */
  async get<T>(path: string, needs: string): Promise<T | undefined> {
    const { status, json } = await this.send({ method: 'GET', path }, needs);
    return status === 404 ? undefined : (json as T);
  }

  /** Any request; statuses 2xx, 404 and 409 are returned, others thrown. */
  async send(request: HttpRequest, needs: string): Promise<{ status: number; json: unknown }> {
    const credential = await this.access.credentials.current();
    let response = await this.exchange(request, credential);
    if (response.status === 401) {
      // Authentication comes before anything else: nothing was done, so a retry is safe.
      const renewed = await this.access.credentials.renew(credential);
      if (renewed) response = await this.exchange(request, renewed);
    }
    let json: unknown;
    try {
      json = response.body.length > 0 ? JSON.parse(response.body.toString('utf8')) : undefined;
    } catch {
      json = undefined;
    }
    const { status } = response;
    if ((status >= 200 && status < 300) || status === 404 || status === 409) return { status, json };
    const message = (json as Status | undefined)?.message ?? response.body.toString('utf8').slice(0, 200);
    if (status === 401)
      throw new KubeError(
        status,
        `the Kubernetes API at ${this.server} does not accept netplug's credentials (user "${this.access.user}"): ${message}`,
      );
    if (status === 403) throw new KubeError(status, `the Kubernetes API at ${this.server} refused: ${message}; netplug needs ${needs}`);
    if (status === 429 || status >= 500)
      throw new KubeUnavailableError(
        `the Kubernetes API at ${this.server} answered ${request.method} ${request.path} with ${status}: ${message}`,
      );
    throw new KubeError(status, `the Kubernetes API at ${this.server} refused ${request.method} ${request.path} (${status}): ${message}`);
  }

  warmUp(): void {
    const path = `${this.prefix}/version`;
    if (this.http) this.http.warmUp(path);
    // The exec plugin runs first; its failure surfaces on the first request.
    else
      this.access.credentials
        .current()
        .then((credential) => this.connection(credential).warmUp(path))
        .catch(() => undefined);
  }

  close(): void {
    for (const http of [...this.retired, ...(this.http ? [this.http] : [])]) http.close();
  }

  private async exchange(request: HttpRequest, credential: Credential): Promise<HttpResponse> {
    this.requests++;
    const headers: Record<string, string> = { Accept: 'application/json', ...request.headers };
    if (credential.token) headers['Authorization'] = `Bearer ${credential.token}`;
    try {
      return await this.connection(credential).request({ ...request, path: `${this.prefix}${request.path}`, headers });
    } catch (err) {
      if (err instanceof HttpUnavailableError)
        throw new KubeUnavailableError(`the Kubernetes API at ${this.server} did not answer: ${err.message}`);
      if (err instanceof HttpTlsError) throw new KubeError(0, err.message);
      throw err;
    }
  }

  /** The connection presenting `credential`'s client certificate, else the kubeconfig's fixed one. */
  private connection(credential: Credential): ApiConnection {
    const cert = credential.cert ?? this.access.tls.cert;
    if (this.http && (this.httpCert === cert || (cert && this.httpCert?.equals(cert)))) return this.http;
    const tls: TlsFiles = credential.cert ? { ...this.access.tls, cert: credential.cert, key: credential.key as Buffer } : this.access.tls;
    let proxy: URL | undefined;
    try {
      proxy = proxyFor(this.endpoint);
    } catch (err) {
      // A proxy variable of the node's environment that is not a usable URL: a setting to fix.
      throw new KubeSettingsError((err as Error).message.split(' ')[0] as string, (err as Error).message);
    }
    let http: ApiConnection;
    try {
      http = this.multiplexWith
        ? this.multiplexWith({ endpoint: this.endpoint, tls, requestTimeoutMs: 10_000 })
        : new HttpClient({ endpoints: [this.endpoint], tls, requestTimeoutMs: 10_000, proxy });
    } catch (err) {
      if (!(err instanceof TlsMaterialError)) throw err;
      const origin = credential.cert && err.part !== 'ca' ? credential.certOrigin : this.access.tlsOrigins[err.part];
      throw new KubeSettingsError('kubernetes.kubeconfig', `the ${TLS_PARTS[err.part]} (${origin ?? 'none given'}): ${err.message}`);
    }
    if (this.http) this.retired.push(this.http);
    this.http = http;
    this.httpCert = cert;
    return http;
  }
}

/** The proxy for `endpoint`, or undefined where none applies or the setting is unusable (refused on first use). */
function proxyOf(endpoint: URL): URL | undefined {
  try {
    return proxyFor(endpoint);
  } catch {
    return undefined;
  }
}

/** A client for the API that `kubernetes.kubeconfig` or `kubernetes.k8s_api_root` names. */
export async function openKubeClient(settings: KubernetesSettings, options: KubeClientOptions = {}): Promise<KubeClient> {
  return new KubeClient(await apiAccess(settings), options);
}
