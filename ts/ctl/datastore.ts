// Which datastore netplugctl talks to: flags, else a netconf or conflist (--config), else the
// environment (DATASTORE_TYPE, ETCD_ENDPOINTS, ...), field by field in that order.
import { readFileSync } from 'node:fs';

import type { DatastoreSettings } from '../store/open.ts';
import { UsageError } from './usage.ts';

// etcd_authority and etcd_scheme (deprecated) have no flags, but are read from a config or the environment.
const FIELDS = ['datastore_type', 'etcd_endpoints', 'etcd_discovery_srv', 'etcd_key_file', 'etcd_cert_file', 'etcd_ca_cert_file', 'etcd_authority', 'etcd_scheme'] as const;
type Field = (typeof FIELDS)[number];

/** `--etcd-endpoints` for etcd_endpoints, and so on. */
export const flagOf = (field: Field) => field.replaceAll('_', '-');

export function datastoreSettings(flags: Record<string, unknown>, env: Readonly<Record<string, string | undefined>>): DatastoreSettings {
  const fromConfig = typeof flags['config'] === 'string' ? settingsInConfig(flags['config']) : {};
  const settings: DatastoreSettings = {};
  for (const field of FIELDS) {
    const value = flags[flagOf(field)] ?? fromConfig[field] ?? env[field.toUpperCase()];
    if (typeof value === 'string' && value !== '') settings[field] = value;
  }
  return settings;
}

/** The datastore fields of a netconf, or of the netplug entry of a conflist. */
function settingsInConfig(path: string): Partial<Record<Field, string>> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new UsageError(`--config ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const plugins = (json as { plugins?: unknown }).plugins;
  const netconf = Array.isArray(plugins) ? (plugins.find((p: { type?: unknown }) => p?.type === 'netplug') ?? plugins[0]) : json;
  if (!netconf || typeof netconf !== 'object') throw new UsageError(`--config ${path}: no netplug network configuration in it`);
  return Object.fromEntries(FIELDS.filter((f) => typeof (netconf as Record<string, unknown>)[f] === 'string').map((f) => [f, (netconf as Record<string, string>)[f]]));
}
