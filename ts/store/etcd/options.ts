// Where the etcd datastore is, from the netconf (or netplugctl's flags): etcd_endpoints, else DNS
// SRV discovery under etcd_discovery_srv, else the deprecated etcd_scheme://etcd_authority; mutual
// TLS from etcd_key_file + etcd_cert_file; server trust from etcd_ca_cert_file (every root in it),
// else the platform's store (read by the native client, and only if an https endpoint needs it).
import { readFileSync } from 'node:fs';

import { StoreError, StoreUnavailableError } from '../store.ts';
import type { TlsFiles } from '../../net/http-client.ts';
import type { GatewayOptions } from './http.ts';

export interface EtcdSettings {
  etcd_endpoints?: string | undefined;
  etcd_discovery_srv?: string | undefined;
  etcd_authority?: string | undefined;
  etcd_scheme?: string | undefined;
  etcd_key_file?: string | undefined;
  etcd_cert_file?: string | undefined;
  etcd_ca_cert_file?: string | undefined;
}

/** Raised for settings that cannot work, naming the field (the plugin reports error 7). */
export class EtcdSettingsError extends StoreError {
  readonly field: string;

  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

export async function gatewayOptions(settings: EtcdSettings): Promise<GatewayOptions> {
  const endpoints = settings.etcd_endpoints
    ? parseEndpoints(settings.etcd_endpoints)
    : settings.etcd_discovery_srv
      ? await discover(settings.etcd_discovery_srv)
      : [endpointUrl('etcd_authority', `${settings.etcd_scheme ?? 'http'}://${settings.etcd_authority ?? '127.0.0.1:2379'}`)];
  const tls: TlsFiles = {};
  if (settings.etcd_ca_cert_file) tls.ca = readPem('etcd_ca_cert_file', settings.etcd_ca_cert_file);
  if (settings.etcd_cert_file) tls.cert = readPem('etcd_cert_file', settings.etcd_cert_file);
  if (settings.etcd_key_file) tls.key = readPem('etcd_key_file', settings.etcd_key_file);
  const secured = Object.keys(tls).length > 0;
  if (secured && endpoints.some((url) => url.protocol !== 'https:')) {
    const field = settings.etcd_endpoints ? 'etcd_endpoints' : 'etcd_scheme';
    throw new EtcdSettingsError(
      field,
      `TLS files are given, so the etcd endpoints must be https:// (${endpoints.map((u) => u.origin).join(', ')})`,
    );
  }
  return { endpoints, ...(secured ? { tls } : {}) };
}

function parseEndpoints(list: string): URL[] {
  return list
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean)
    .map((item) => endpointUrl('etcd_endpoints', item));
}

function endpointUrl(field: string, text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new EtcdSettingsError(field, `"${text}" is not a URL such as http://127.0.0.1:2379`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new EtcdSettingsError(field, `"${text}" must be an http:// or https:// URL`);
  }
  return url;
}

function readPem(field: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new EtcdSettingsError(field, `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** etcd's client discovery: SRV records _etcd-client-ssl._tcp (https) and _etcd-client._tcp (http). */
async function discover(domain: string): Promise<URL[]> {
  const { Resolver } = process.getBuiltinModule('node:dns').promises;
  const resolver = new Resolver({ timeout: 2000, tries: 2 });
  const found: URL[] = [];
  const failures: string[] = [];
  for (const [service, scheme] of [
    ['_etcd-client-ssl._tcp', 'https'],
    ['_etcd-client._tcp', 'http'],
  ] as const) {
    try {
      for (const record of await resolver.resolveSrv(`${service}.${domain}`)) {
        found.push(new URL(`${scheme}://${record.name.replace(/\.$/, '')}:${record.port}`));
      }
    } catch (err) {
      failures.push(`${service}.${domain}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  if (found.length === 0) {
    throw new StoreUnavailableError(`etcd_discovery_srv "${domain}": no SRV records found (${failures.join('; ')})`);
  }
  return found;
}
