// Where the Kubernetes API is and how netplug proves who it is: from `kubernetes.kubeconfig`
// (its current context: server, certificate authority, client certificate or token), with
// `kubernetes.k8s_api_root` overriding the server, or from the API root alone.
//
// Read here rather than through @kubernetes/client-node's KubeConfig: that package costs a plugin
// process some 200 ms to load on every pod. Exec and auth-provider credentials are refused with a
// clear error; the node agent writes a kubeconfig with a certificate or a token, as the reference's
// does.
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';

import type { TlsFiles } from '../net/http-client.ts';

export interface KubernetesSettings {
  kubeconfig?: string | undefined;
  k8s_api_root?: string | undefined;
}

export interface ApiAccess {
  server: URL;
  tls: TlsFiles;
  token?: string;
  /** Who netplug is, for messages: the kubeconfig user, or "anonymous". */
  user: string;
}

/** A setting that cannot work, naming its netconf field. */
export class KubeSettingsError extends Error {
  override readonly name = 'KubeSettingsError';
  readonly field: string;

  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

interface Kubeconfig {
  'current-context'?: string;
  contexts?: { name: string; context?: { cluster?: string; user?: string } }[];
  clusters?: { name: string; cluster?: Record<string, unknown> }[];
  users?: { name: string; user?: Record<string, unknown> }[];
}

export async function apiAccess(settings: KubernetesSettings): Promise<ApiAccess> {
  const root = settings.k8s_api_root ? apiRoot(settings.k8s_api_root) : undefined;
  if (!settings.kubeconfig) {
    if (!root)
      throw new KubeSettingsError('kubernetes', 'Kubernetes mode needs kubernetes.kubeconfig or kubernetes.k8s_api_root to reach the API');
    return { server: root, tls: {}, user: 'anonymous' };
  }
  const path = settings.kubeconfig;
  const field = 'kubernetes.kubeconfig';
  const fail = (message: string) => new KubeSettingsError(field, `${path}: ${message}`);
  const config = await parse(path, fail);
  const contextName = config['current-context'];
  const context =
    config.contexts?.find((c) => c.name === contextName)?.context ??
    (config.contexts?.length === 1 ? config.contexts[0]?.context : undefined);
  if (!context) throw fail(contextName ? `no context "${contextName}"` : 'no current-context');
  const cluster = config.clusters?.find((c) => c.name === context.cluster)?.cluster;
  if (!cluster) throw fail(`no cluster "${context.cluster}"`);
  const user = config.users?.find((u) => u.name === context.user)?.user ?? {};
  const file = (key: string): Buffer | undefined => {
    const value = user[key] ?? cluster[key];
    if (typeof value !== 'string' || value === '') return undefined;
    const resolved = isAbsolute(value) ? value : join(dirname(path), value);
    try {
      return readFileSync(resolved);
    } catch (err) {
      throw fail(`${key} ${resolved}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  };
  const data = (key: string): Buffer | undefined => {
    const value = user[key] ?? cluster[key];
    return typeof value === 'string' && value !== '' ? Buffer.from(value, 'base64') : undefined;
  };
  if (cluster['insecure-skip-tls-verify'] === true) throw fail('insecure-skip-tls-verify is not supported: give the certificate-authority');
  if (user['exec'] || user['auth-provider'])
    throw fail(`user "${context.user}" authenticates through a plugin, which netplug does not run; give a client certificate or a token`);
  const server = root ?? serverUrl(cluster['server'], fail);
  const tls: TlsFiles = {};
  const ca = data('certificate-authority-data') ?? file('certificate-authority');
  const cert = data('client-certificate-data') ?? file('client-certificate');
  const key = data('client-key-data') ?? file('client-key');
  if (ca) tls.ca = ca;
  if (cert) tls.cert = cert;
  if (key) tls.key = key;
  const tokenFile = file('tokenFile');
  const token = typeof user['token'] === 'string' ? user['token'] : tokenFile?.toString('utf8').trim();
  return { server, tls, ...(token ? { token } : {}), user: context.user ?? 'anonymous' };
}

/** JSON (what netplug's installers write) or YAML (what most tools write). */
async function parse(path: string, fail: (message: string) => Error): Promise<Kubeconfig> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw fail((err as NodeJS.ErrnoException).code ?? (err as Error).message);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Loaded only for YAML: a plugin process whose kubeconfig is JSON never pays for it.
    const { load } = await import('js-yaml');
    try {
      parsed = load(text);
    } catch (err) {
      throw fail(`not a kubeconfig: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  if (!parsed || typeof parsed !== 'object') throw fail('not a kubeconfig');
  return parsed as Kubeconfig;
}

function serverUrl(value: unknown, fail: (message: string) => Error): URL {
  if (typeof value !== 'string') throw fail('its cluster has no server');
  try {
    return new URL(value);
  } catch {
    throw fail(`server "${value}" is not a URL`);
  }
}

/** The API root, without any path after it (the reference strips everything from /api/ on). */
function apiRoot(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new KubeSettingsError('kubernetes.k8s_api_root', `"${text}" is not a URL such as https://10.96.0.1:443`);
  }
  url.pathname = url.pathname.replace(/\/api(\/.*)?$/, '') || '/';
  return url;
}
