// The values of the template's placeholders, from the environment (the reference installer's, with
// netplug names). Empty values remove their fields (render-conflist.ts).
import { posix } from 'node:path';

import { KUBECONFIG_NAME, nodeName, TLS_DIR_NAME, type InstallSettings } from './settings.ts';

export function placeholderValues(settings: InstallSettings, tlsCopied: boolean): Record<string, string> {
  const { env, hostNetDir } = settings;
  const tlsFile = (name: string) => (tlsCopied ? posix.join(hostNetDir, TLS_DIR_NAME, name) : '');
  return {
    KUBECONFIG_FILEPATH: posix.join(hostNetDir, KUBECONFIG_NAME),
    CNI_MTU: settings.mtu,
    KUBERNETES_NODE_NAME: nodeName(env),
    DATASTORE_TYPE: env.DATASTORE_TYPE || 'kubernetes',
    ETCD_ENDPOINTS: env.ETCD_ENDPOINTS ?? '',
    ETCD_DISCOVERY_SRV: env.ETCD_DISCOVERY_SRV ?? '',
    ETCD_CA_CERT_FILE: tlsFile('etcd-ca'),
    ETCD_CERT_FILE: tlsFile('etcd-cert'),
    ETCD_KEY_FILE: tlsFile('etcd-key'),
    LOG_LEVEL: env.LOG_LEVEL || 'info',
    LOG_FILE_PATH: env.LOG_FILE_PATH ?? '/var/log/netplug/cni/cni.log',
    LOG_FILE_MAX_SIZE: env.LOG_FILE_MAX_SIZE || '100',
    LOG_FILE_MAX_AGE: env.LOG_FILE_MAX_AGE || '30',
    LOG_FILE_MAX_COUNT: env.LOG_FILE_MAX_COUNT || '10',
    KUBERNETES_SERVICE_HOST: env.KUBERNETES_SERVICE_HOST ?? '',
    KUBERNETES_SERVICE_PORT: env.KUBERNETES_SERVICE_PORT ?? '',
  };
}
