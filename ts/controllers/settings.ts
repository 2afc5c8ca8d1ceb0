// netplug-kube-controllers' settings, from its environment (names as the reference's
// kube-controllers takes them; see the issue 10 contract).
import type { DatastoreSettings } from '../store/open.ts';
import { parseDuration } from '../config/duration.ts';

export const CONTROLLERS = ['node', 'ipam'] as const;
export type ControllerName = (typeof CONTROLLERS)[number];

export interface ControllersSettings {
  datastore: DatastoreSettings & { datastore_type: 'etcdv3' | 'kubernetes' };
  /** The kubeconfig file; none: the pod's service account (in-cluster). */
  kubeconfig: string | undefined;
  enabled: ReadonlySet<ControllerName>;
  /** How long a pod must stay missing before its addresses are released. */
  leakGraceMs: number;
  health: { host: string; port: number };
}

/** A setting that cannot work: the message names the variable and its value. */
export class SettingsError extends Error {
  override readonly name = 'SettingsError';
}

export function controllersSettings(env: NodeJS.ProcessEnv): ControllersSettings {
  const type = env['DATASTORE_TYPE'] || 'etcdv3';
  if (type !== 'etcdv3' && type !== 'kubernetes')
    throw new SettingsError(`DATASTORE_TYPE "${type}" is not known; use "etcdv3" or "kubernetes"`);
  const kubeconfig = env['KUBECONFIG'] || undefined;
  const etcd = {
    etcd_endpoints: env['ETCD_ENDPOINTS'],
    etcd_discovery_srv: env['ETCD_DISCOVERY_SRV'],
    etcd_ca_cert_file: env['ETCD_CA_CERT_FILE'],
    etcd_cert_file: env['ETCD_CERT_FILE'],
    etcd_key_file: env['ETCD_KEY_FILE'],
  };
  const datastore = Object.fromEntries(Object.entries(etcd).filter(([, value]) => value)) as DatastoreSettings;

  const listed = (env['ENABLED_CONTROLLERS'] ?? 'node,ipam')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  const unknown = listed.filter((name) => !(CONTROLLERS as readonly string[]).includes(name));
  if (unknown.length > 0)
    throw new SettingsError(`ENABLED_CONTROLLERS names "${unknown.join('", "')}": not one of ${CONTROLLERS.join(', ')}`);

  const grace = env['LEAK_GRACE_PERIOD'] || '15m';
  const leakGraceMs = parseDuration(grace);
  if (leakGraceMs === undefined) throw new SettingsError(`LEAK_GRACE_PERIOD "${grace}" is not a duration such as 15m, 90s or 1h30m`);

  return {
    datastore: { ...datastore, datastore_type: type, ...(type === 'kubernetes' && kubeconfig ? { kubernetes: { kubeconfig } } : {}) },
    kubeconfig,
    enabled: new Set(listed as ControllerName[]),
    leakGraceMs,
    health: hostPort(env['NETPLUG_CONTROLLERS_HEALTH_ADDR'] || '0.0.0.0:9094'),
  };
}

function hostPort(text: string): { host: string; port: number } {
  const colon = text.lastIndexOf(':');
  const host = text.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const port = Number(text.slice(colon + 1));
  if (colon < 0 || !Number.isInteger(port) || port < 0 || port > 65535 || text.slice(colon + 1) === '')
    throw new SettingsError(`NETPLUG_CONTROLLERS_HEALTH_ADDR "${text}" must be host:port, such as 0.0.0.0:9094`);
  return { host: host || '0.0.0.0', port };
}
