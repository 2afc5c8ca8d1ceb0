// Plain JSON REST on the Kubernetes API through @kubernetes/client-node's own transport and
// configuration (the kubeconfig's server with any path prefix, credentials, TLS and proxy): for
// netplugctl's cluster commands, which read and write objects of any kind as the server sends them
// (managedFields and fields the typed models do not know included), with JSON, merge and apply
// patches and metadata-only lists, which the typed clients cannot all do.
import * as k8s from '@kubernetes/client-node';

const REQUEST_TIMEOUT_MS = 60_000;

/** The API server's answer was not a success: its status and message. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly status: number;
  /** True when the server could not apply a JSON patch (a failed test, a path not there): the object is unchanged. */
  readonly patchNotApplied: boolean;

  constructor(status: number, message: string, patchNotApplied = false) {
    super(message);
    this.status = status;
    this.patchNotApplied = patchNotApplied;
  }
}

interface Status {
  message?: unknown;
  details?: { name?: string; causes?: { type?: string; message?: string }[] };
}

/**
 * The Status's message, with its causes where the message does not say them. A JSON patch that
 * does not apply (a failed test, a path not there) is answered 422 Invalid about no object in
 * particular (no details.name; the reason, if given at all, in a cause of type
 * UnexpectedServerResponse), unlike an object that fails validation.
 */
function apiError(status: number, body: Status | undefined, fallback: string): ApiError {
  const message = typeof body?.message === 'string' ? body.message : fallback;
  const causes = body?.details?.causes ?? [];
  const unsaid = causes.map((cause) => cause.message ?? '').filter((text) => text !== '' && !message.includes(text));
  const notApplied =
    status === 422 && (body?.details?.name === undefined || causes.some((cause) => cause.type === 'UnexpectedServerResponse'));
  return new ApiError(status, unsaid.length > 0 ? `${message}: ${unsaid.join('; ')}` : message, notApplied);
}

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface Api {
  request(method: Method, path: string, options?: { body?: unknown; contentType?: string; accept?: string }): Promise<unknown>;
}

export function openApi(config: k8s.KubeConfig): Api {
  const cluster = config.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig names no current cluster');
  const configuration = k8s.createConfiguration({
    baseServer: new k8s.ServerConfiguration(cluster.server, {}),
    authMethods: { default: config },
  });
  return {
    async request(method, path, options = {}) {
      const context = configuration.baseServer.makeRequestContext(path, method as k8s.HttpMethod);
      context.setHeaderParam('Accept', options.accept ?? 'application/json');
      if (options.body !== undefined) {
        context.setHeaderParam('Content-Type', options.contentType ?? 'application/json');
        context.setBody(typeof options.body === 'string' ? options.body : JSON.stringify(options.body));
      }
      // A server that accepts the connection and never answers must not hang the command.
      context.setSignal(AbortSignal.timeout(REQUEST_TIMEOUT_MS));
      await configuration.authMethods.default?.applySecurityAuthentication(context);
      const response = await configuration.httpApi.send(context).toPromise();
      const text = await response.body.text();
      const json = text === '' ? undefined : parseOrText(text);
      if (response.httpStatusCode < 200 || response.httpStatusCode > 299) {
        throw apiError(response.httpStatusCode, json as Status | undefined, `${method} ${path}: HTTP ${response.httpStatusCode}`);
      }
      return json;
    },
  };
}

function parseOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text.trim().split('\n')[0] };
  }
}

/** The URL path of a resource's collection (all namespaces when `namespace` is not given) or of one object. */
export function resourcePath(
  resource: { apiVersion: string; resource: string; namespaced: boolean },
  namespace?: string,
  name?: string,
): string {
  const root = resource.apiVersion.includes('/') ? `/apis/${resource.apiVersion}` : `/api/${resource.apiVersion}`;
  const scope = resource.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${root}${scope}/${resource.resource}${name === undefined ? '' : `/${encodeURIComponent(name)}`}`;
}
