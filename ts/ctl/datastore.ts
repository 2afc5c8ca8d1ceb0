// Which datastore netplugctl talks to: flags, else a netconf or conflist (--config), else the
// environment (DATASTORE_TYPE, ETCD_ENDPOINTS, ..., KUBECONFIG), field by field in that order.
// --kubeconfig alone means the Kubernetes datastore; KUBECONFIG alone does not (it is often set
// for other tools).
import { readFileSync } from 'node:fs';

import type { DatastoreSettings } from '../store/open.ts';
import { UsageError } from './usage.ts';

// etcd_authority and etcd_scheme (deprecated) have no flags, but are read from a config or the environment.
const FIELDS = [
  'datastore_type',
  'etcd_endpoints',
  'etcd_discovery_srv',
  'etcd_key_file',
  'etcd_cert_file',
  'etcd_ca_cert_file',
  'etcd_authority',
  'etcd_scheme',
] as const;
type Field = (typeof FIELDS)[number];

/** The flags that choose the datastore, shared by every netplugctl command that opens one (node:util parseArgs options). */
export const DATASTORE_FLAGS = {
  'datastore-type': { type: 'string' },
  'etcd-endpoints': { type: 'string' },
  'etcd-discovery-srv': { type: 'string' },
  'etcd-key-file': { type: 'string' },
  'etcd-cert-file': { type: 'string' },
  'etcd-ca-cert-file': { type: 'string' },
  kubeconfig: { type: 'string' },
  'k8s-api-root': { type: 'string' },
  config: { type: 'string' },
} as const;

/** `--etcd-endpoints` for etcd_endpoints, and so on. */
const flagOf = (field: Field) => field.replaceAll('_', '-');

export function datastoreSettings(flags: Record<string, unknown>, env: Readonly<Record<string, string | undefined>>): DatastoreSettings {
  const fromConfig = typeof flags['config'] === 'string' ? settingsInConfig(flags['config']) : {};
  const settings: DatastoreSettings = {};
  for (const field of FIELDS) {
    const value = flags[flagOf(field)] ?? fromConfig[field] ?? env[field.toUpperCase()];
    if (typeof value === 'string' && value !== '') settings[field] = value;
  }
  const kubeFlag = typeof flags['kubeconfig'] === 'string' || typeof flags['k8s-api-root'] === 'string';
  if (kubeFlag && flags['datastore-type'] === undefined) settings.datastore_type = 'kubernetes';
  if (settings.datastore_type === 'kubernetes') {
    const kubeconfig = flags['kubeconfig'] ?? fromConfig.kubernetes?.kubeconfig ?? env['KUBECONFIG'];
    const root = flags['k8s-api-root'] ?? fromConfig.kubernetes?.k8s_api_root;
    settings.kubernetes = {
      ...(typeof kubeconfig === 'string' && kubeconfig !== '' ? { kubeconfig } : {}),
      ...(typeof root === 'string' && root !== '' ? { k8s_api_root: root } : {}),
    };
  }
  return settings;
}

/** The datastore fields of a netconf, or of the netplug entry of a conflist. */
function settingsInConfig(path: string): Partial<Record<Field, string>> & { kubernetes?: { kubeconfig?: string; k8s_api_root?: string } } {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new UsageError(`--config ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const plugins = (json as { plugins?: unknown }).plugins;
  const netconf = Array.isArray(plugins) ? (plugins.find((p: { type?: unknown }) => p?.type === 'netplug') ?? plugins[0]) : json;
  if (!netconf || typeof netconf !== 'object') throw new UsageError(`--config ${path}: no netplug network configuration in it`);
  const fields = Object.fromEntries(
    FIELDS.filter((f) => typeof (netconf as Record<string, unknown>)[f] === 'string').map((f) => [
      f,
      (netconf as Record<string, string>)[f],
    ]),
  );
  const kubernetes = (netconf as { kubernetes?: unknown }).kubernetes;
  return kubernetes && typeof kubernetes === 'object'
    ? { ...fields, kubernetes: kubernetes as { kubeconfig?: string; k8s_api_root?: string } }
    : fields;
}
