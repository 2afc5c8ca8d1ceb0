// The Kubernetes API as netplug uses it: JSON over the native HTTP client, with the kubeconfig's
// client certificate or token. Failures name the server and, for a refusal, what netplug's
// identity lacks.
import {
  HttpClient,
  HttpTlsError,
  HttpUnavailableError,
  TlsMaterialError,
  type HttpRequest,
  type HttpResponse,
} from '../net/http-client.ts';
import { proxyFor } from '../net/proxy.ts';
import { apiAccess, KubeSettingsError, type ApiAccess, type KubernetesSettings } from './kubeconfig.ts';

/** The API server could not be reached or did not answer: try again later (CNI error 11). */
export class KubeUnavailableError extends Error {
  override readonly name = 'KubeUnavailableError';
}

/** The API server answered with a refusal or an error. */
export class KubeError extends Error {
  override readonly name = 'KubeError';
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

interface Status {
  message?: string;
  reason?: string;
}

export class KubeClient {
  readonly access: ApiAccess;
  private readonly http: HttpClient;
  /** Requests sent, for the benchmarks' count of API round trips. */
  requests = 0;

  constructor(access: ApiAccess) {
    this.access = access;
    try {
      this.http = new HttpClient({ endpoints: [access.server], tls: access.tls, requestTimeoutMs: 10_000, proxy: proxyFor(access.server) });
    } catch (err) {
      if (err instanceof TlsMaterialError)
        throw new KubeSettingsError(
          'kubernetes.kubeconfig',
          `the kubeconfig's ${{ ca: 'certificate authority', cert: 'client certificate', key: 'client key' }[err.part]}: ${err.message}`,
        );
      throw err;
    }
  }

  get server(): string {
    return this.access.server.origin;
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
    this.requests++;
    const headers: Record<string, string> = { Accept: 'application/json', ...request.headers };
    if (this.access.token) headers['Authorization'] = `Bearer ${this.access.token}`;
    let response: HttpResponse;
    try {
      response = await this.http.request({ ...request, headers });
    } catch (err) {
      if (err instanceof HttpUnavailableError)
        throw new KubeUnavailableError(`the Kubernetes API at ${this.server} did not answer: ${err.message}`);
      if (err instanceof HttpTlsError) throw new KubeError(0, err.message);
      throw err;
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
    this.http.warmUp();
  }

  close(): void {
    this.http.close();
  }
}

/** A client for the API that `kubernetes.kubeconfig` or `kubernetes.k8s_api_root` names. */
export async function openKubeClient(settings: KubernetesSettings): Promise<KubeClient> {
  return new KubeClient(await apiAccess(settings));
}
