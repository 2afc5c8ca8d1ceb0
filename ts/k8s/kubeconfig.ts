// Where the Kubernetes API is and how netplug proves who it is: from `kubernetes.kubeconfig` (its
// current context), read as client-go reads it, with `kubernetes.k8s_api_root` overriding the
// server, or from the API root alone.
//
// - Server: the URL keeps any path prefix (`https://host/k8s/clusters/c-1`, as Rancher writes):
//   every request goes under it.
// - Trust: the cluster's certificate-authority-data or certificate-authority file; without either,
//   no CA is given and the HTTP layer trusts the system roots. insecure-skip-tls-verify is refused:
//   netplug would send its credentials (which may write IPAM state) to whoever answers, and the
//   fix, giving the CA, is always at hand where the kubeconfig is written.
// - Credentials (credentials.ts): token, tokenFile (read at use), client-certificate(-data) and
//   client-key(-data), or an exec plugin (exec-config.ts, exec-credential.ts). auth-provider
//   (client-go's removed in-tree providers) and basic authentication are refused, naming the user.
// - Files named in the kubeconfig are relative to its directory, as client-go resolves them.
//
// Read here rather than through @kubernetes/client-node's KubeConfig: that package costs a plugin
// process some 200 ms to load on every pod. No message carries a token, key or plugin output.
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';

import type { TlsFiles } from '../net/http-client.ts';
import { FixedCredential, TokenFile, type CredentialSource } from './credentials.ts';
import { KubeSettingsError } from './errors.ts';
import { execSettings } from './exec-config.ts';

export { KubeSettingsError } from './errors.ts';

export interface KubernetesSettings {
  kubeconfig?: string | undefined;
  k8s_api_root?: string | undefined;
}

export interface ApiAccess {
  /** The API: scheme, host, port, and the path prefix every request goes under (no trailing slash). */
  server: URL;
  /** The CA (none: the system roots) and a fixed client certificate and key. */
  tls: TlsFiles;
  /** Where each part of `tls` came from, for messages. */
  tlsOrigins: Partial<Record<keyof TlsFiles, string>>;
  credentials: CredentialSource;
  /** Who netplug is, for messages: the kubeconfig user, or "anonymous". */
  user: string;
}

interface Kubeconfig {
  'current-context'?: unknown;
  contexts?: { name?: unknown; context?: { cluster?: unknown; user?: unknown } }[];
  clusters?: { name?: unknown; cluster?: Record<string, unknown> }[];
  users?: { name?: unknown; user?: Record<string, unknown> }[];
}

const FIELD = 'kubernetes.kubeconfig';
const EXEC_EXTENSION = 'client.authentication.k8s.io/exec';

export async function apiAccess(settings: KubernetesSettings): Promise<ApiAccess> {
  const root = settings.k8s_api_root ? apiRoot(settings.k8s_api_root) : undefined;
  if (!settings.kubeconfig) {
    if (!root)
      throw new KubeSettingsError('kubernetes', 'Kubernetes mode needs kubernetes.kubeconfig or kubernetes.k8s_api_root to reach the API');
    return { server: root, tls: {}, tlsOrigins: {}, credentials: new FixedCredential({}), user: 'anonymous' };
  }
  const path = settings.kubeconfig;
  const fail = (message: string) => new KubeSettingsError(FIELD, `${path}: ${message}`);
  const config = await parse(path, fail);

  // Names as messages quote them: a kubeconfig is no place for secrets, but it may hold anything.
  const contextName = text(config['current-context']);
  const contexts = list(config.contexts, 'contexts', fail);
  const context = contextName ? contexts.find((c) => c.name === contextName) : contexts.length === 1 ? contexts[0] : undefined;
  if (!context) throw fail(contextName ? `no context ${quote(contextName)} in contexts` : 'no current-context');
  const clusterName = text(context.context?.cluster) ?? '';
  const cluster = list(config.clusters, 'clusters', fail).find((c) => c.name === clusterName)?.cluster;
  if (!cluster || typeof cluster !== 'object') throw fail(`no cluster ${quote(clusterName)} in clusters`);
  const userName = text(context.context?.user);
  const user = userName ? list(config.users, 'users', fail).find((u) => u.name === userName)?.user : {};
  if (!user || typeof user !== 'object') throw fail(`no user ${quote(userName ?? '')} in users`);

  const base = dirname(resolve(path));
  const clusterSection = `cluster ${quote(clusterName)}`;
  const userSection = `user ${quote(userName ?? '')}`;
  const clusterFail = (message: string) => fail(`${clusterSection}: ${message}`);
  const userFail = (message: string) => fail(`${userSection}: ${message}`);
  const fileOf = (value: string) => (isAbsolute(value) ? value : resolve(base, value));
  /** `<name>-data` (base64) or else the file `<name>`, as client-go prefers them; and where it came from, for messages. */
  const material = (entries: Record<string, unknown>, section: string, name: string) => {
    const data = text(entries[`${name}-data`]);
    if (data) return { bytes: Buffer.from(data, 'base64'), origin: `${path}: ${section}: ${name}-data` };
    const file = text(entries[name]);
    if (!file) return undefined;
    const resolved = fileOf(file);
    try {
      return { bytes: readFileSync(resolved), origin: `${path}: ${section}: ${name} ${resolved}` };
    } catch (err) {
      throw fail(`${section}: ${name} ${resolved}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  };

  if (cluster['insecure-skip-tls-verify'] === true)
    throw clusterFail(
      'insecure-skip-tls-verify is not supported: netplug sends its credentials only to a server it can verify; give certificate-authority-data or certificate-authority (or neither, to trust the system roots)',
    );
  const server = root ?? serverUrl(cluster['server'], clusterFail);
  const tls: TlsFiles = {};
  const tlsOrigins: ApiAccess['tlsOrigins'] = {};
  const ca = material(cluster, clusterSection, 'certificate-authority');
  const cert = material(user, userSection, 'client-certificate');
  const key = material(user, userSection, 'client-key');
  if (ca) [tls.ca, tlsOrigins.ca] = [ca.bytes, ca.origin];
  if (cert) [tls.cert, tlsOrigins.cert] = [cert.bytes, cert.origin];
  if (key) [tls.key, tlsOrigins.key] = [key.bytes, key.origin];

  if (user['auth-provider'] !== undefined) {
    const provider = text((user['auth-provider'] as { name?: unknown } | null)?.name) ?? '';
    throw userFail(
      `auth-provider ${JSON.stringify(provider.slice(0, 40))} is not supported (client-go no longer runs auth providers either); use the provider's exec credential plugin, a token or a client certificate`,
    );
  }
  if (user['username'] !== undefined || user['password'] !== undefined)
    throw userFail('username and password (basic authentication) are not supported; the Kubernetes API no longer accepts them');
  const exec = user['exec'] === undefined || user['exec'] === null ? undefined : execSettings(user['exec'], userFail);
  const token = text(user['token']);
  const tokenFile = text(user['tokenFile']);
  let credentials: CredentialSource;
  if (tokenFile) credentials = new TokenFile(fileOf(tokenFile), token, userFail);
  else if (token) credentials = new FixedCredential({ token });
  else if (exec) {
    // A token beside exec wins, as in client-go; the plugin runner (and node:child_process) is loaded only here.
    const { ExecCredentialSource } = await import('./exec-credential.ts');
    const clusterInfo = exec.provideClusterInfo ? execClusterInfo(cluster, server, ca?.bytes) : undefined;
    credentials = new ExecCredentialSource({
      settings: exec,
      kubeconfig: path,
      user: userName ?? '',
      ...(clusterInfo ? { cluster: clusterInfo } : {}),
    });
  } else credentials = new FixedCredential({});
  return { server, tls, tlsOrigins, credentials, user: userName ?? 'anonymous' };
}

/** spec.cluster of KUBERNETES_EXEC_INFO (provideClusterInfo): the cluster as client-go describes it to a plugin. */
function execClusterInfo(cluster: Record<string, unknown>, server: URL, ca: Buffer | undefined): Record<string, unknown> {
  const extensions = Array.isArray(cluster['extensions']) ? (cluster['extensions'] as { name?: unknown; extension?: unknown }[]) : [];
  const config = extensions.find((e) => e?.name === EXEC_EXTENSION)?.extension;
  return {
    server: serverText(server),
    ...(text(cluster['tls-server-name']) ? { 'tls-server-name': cluster['tls-server-name'] } : {}),
    ...(ca ? { 'certificate-authority-data': ca.toString('base64') } : {}),
    ...(text(cluster['proxy-url']) ? { 'proxy-url': cluster['proxy-url'] } : {}),
    ...(cluster['disable-compression'] === true ? { 'disable-compression': true } : {}),
    ...(config !== undefined ? { config } : {}),
  };
}

/** The server as written in messages: origin and path prefix. */
export const serverText = (server: URL): string => `${server.origin}${server.pathname === '/' ? '' : server.pathname}`;

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/** A name from the kubeconfig, quoted and capped for a message. */
const quote = (name: string): string => JSON.stringify(name.length > 100 ? `${name.slice(0, 100)}…` : name);

function list<T>(value: T[] | undefined, name: string, fail: (message: string) => Error): T[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw fail(`${name} is not a list`);
  return value.filter((item) => item && typeof item === 'object');
}

/** JSON (what netplug's installers write) or YAML (what most tools write). */
async function parse(path: string, fail: (message: string) => Error): Promise<Kubeconfig> {
  let source: string;
  try {
    source = readFileSync(path, 'utf8');
  } catch (err) {
    throw fail((err as NodeJS.ErrnoException).code ?? (err as Error).message);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(source);
  } catch {
    // Loaded only for YAML: a plugin process whose kubeconfig is JSON never pays for it.
    const { load } = await import('js-yaml');
    try {
      parsed = load(source);
    } catch (err) {
      // The parser's first line only: it names the position, while later lines would quote the file.
      throw fail(`not a kubeconfig: ${(err as Error).message.split('\n')[0]?.slice(0, 200)}`);
    }
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw fail('not a kubeconfig');
  return parsed as Kubeconfig;
}

/** The cluster's server: https:// when it names none (as client-go assumes), any path kept as the prefix. */
function serverUrl(value: unknown, fail: (message: string) => Error): URL {
  const written = text(value);
  if (!written) throw fail('no server');
  let url: URL;
  try {
    url = new URL(written.includes('://') ? written : `https://${written}`);
  } catch {
    throw fail(`server "${written.slice(0, 200)}" is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw fail(`server "${written.slice(0, 200)}" is not an http(s) URL`);
  return prefixOnly(url);
}

/** The API root, without any path from /api on (as the reference strips it), any prefix before kept. */
function apiRoot(value: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new KubeSettingsError('kubernetes.k8s_api_root', `"${value.slice(0, 200)}" is not a URL such as https://10.96.0.1:443`);
  }
  url.pathname = url.pathname.replace(/\/api(\/.*)?$/, '') || '/';
  return prefixOnly(url);
}

function prefixOnly(url: URL): URL {
  url.pathname = url.pathname.replace(/\/+$/, '') || '/';
  url.search = '';
  url.hash = '';
  return url;
}
