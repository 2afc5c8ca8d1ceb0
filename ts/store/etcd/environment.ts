// The etcd datastore's connection as the resident programs (netplug-node, netplug-kube-controllers)
// take it from their environment: the plugin's netconf fields in upper case. As in the netconf,
// ETCD_ENDPOINTS and ETCD_DISCOVERY_SRV cannot be used together (the plugin refuses that pair; a
// program that quietly picked one would reach another etcd than the plugin on the same node), and
// ETCD_AUTHORITY and ETCD_SCHEME, deprecated, still work, with a warning that says what to set.
import { oneOf, SettingsError, text } from '../../runtime/settings.ts';
import type { EtcdSettings } from './options.ts';

/** The variables, for a program's settings schema. */
export const ETCD_ENVIRONMENT = {
  ETCD_ENDPOINTS: text(),
  ETCD_DISCOVERY_SRV: text(),
  ETCD_AUTHORITY: text(),
  ETCD_SCHEME: oneOf(['http', 'https']),
  ETCD_CA_CERT_FILE: text(),
  ETCD_CERT_FILE: text(),
  ETCD_KEY_FILE: text(),
};

type Given = { [K in keyof typeof ETCD_ENVIRONMENT]: string | undefined };

/**
 * The settings the variables give (only those set), and the deprecation to log at start, if any.
 * Throws SettingsError for ETCD_ENDPOINTS with ETCD_DISCOVERY_SRV, naming both.
 */
export function etcdFromEnvironment(given: Given): { etcd: EtcdSettings; deprecation: string | undefined } {
  if (given.ETCD_ENDPOINTS && given.ETCD_DISCOVERY_SRV)
    throw new SettingsError(
      `ETCD_ENDPOINTS "${given.ETCD_ENDPOINTS}" and ETCD_DISCOVERY_SRV "${given.ETCD_DISCOVERY_SRV}" cannot be used together: set one of them`,
    );
  const etcd: EtcdSettings = {
    etcd_endpoints: given.ETCD_ENDPOINTS,
    etcd_discovery_srv: given.ETCD_DISCOVERY_SRV,
    etcd_authority: given.ETCD_AUTHORITY,
    etcd_scheme: given.ETCD_SCHEME,
    etcd_ca_cert_file: given.ETCD_CA_CERT_FILE,
    etcd_cert_file: given.ETCD_CERT_FILE,
    etcd_key_file: given.ETCD_KEY_FILE,
  };
  return {
    etcd: Object.fromEntries(Object.entries(etcd).filter(([, value]) => value)) as EtcdSettings,
    deprecation: deprecationOf(given),
  };
}

function deprecationOf(given: Given): string | undefined {
  const named = (['ETCD_AUTHORITY', 'ETCD_SCHEME'] as const).filter((name) => given[name]);
  if (named.length === 0) return undefined;
  const set = named.map((name) => `${name} "${given[name]}"`).join(' and ');
  const instead = given.ETCD_ENDPOINTS ? 'ETCD_ENDPOINTS' : given.ETCD_DISCOVERY_SRV ? 'ETCD_DISCOVERY_SRV' : undefined;
  if (instead) return `${set} ${named.length > 1 ? 'are' : 'is'} deprecated and ignored: ${instead} is set; remove ${named.join(' and ')}`;
  const endpoint = `${given.ETCD_SCHEME ?? 'http'}://${given.ETCD_AUTHORITY ?? '127.0.0.1:2379'}`;
  return `${set} ${named.length > 1 ? 'are' : 'is'} deprecated: set ETCD_ENDPOINTS=${endpoint} instead`;
}
