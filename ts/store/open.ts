// Opens the datastore the settings name: etcd (the default), or the Kubernetes API's custom resources.
import { openKubeClient } from '../k8s/client.ts';
import { KubeSettingsError, type KubernetesSettings } from '../k8s/kubeconfig.ts';
import { EtcdClient } from './etcd/client.ts';
import { TlsMaterialError } from '../net/http-client.ts';
import { GatewayConnection, type GatewayOptions } from './etcd/http.ts';
import { EtcdSettingsError, gatewayOptions, type EtcdSettings } from './etcd/options.ts';
import { EtcdStore } from './etcd/store.ts';
import { KubeStore } from './kubernetes/store.ts';
import type { Store } from './store.ts';
import { StoreError } from './store.ts';

export interface DatastoreSettings extends EtcdSettings {
  datastore_type?: string | undefined;
  /** How the Kubernetes datastore reaches the API. */
  kubernetes?: KubernetesSettings | undefined;
}

export async function openStore(settings: DatastoreSettings): Promise<Store> {
  const type = settings.datastore_type ?? 'etcdv3';
  if (type === 'kubernetes') {
    const kube = settings.kubernetes ?? {};
    if (!kube.kubeconfig && !kube.k8s_api_root)
      throw new KubeSettingsError(
        'kubernetes',
        'datastore_type "kubernetes" needs kubernetes.kubeconfig or kubernetes.k8s_api_root to reach the API',
      );
    return new KubeStore(await openKubeClient(kube));
  }
  if (type !== 'etcdv3') throw new StoreError(`datastore_type "${type}" is not known; use "etcdv3" or "kubernetes"`);
  return new EtcdStore(new EtcdClient(gatewayConnection(await gatewayOptions(settings), settings)));
}

const TLS_FIELDS = { ca: 'etcd_ca_cert_file', cert: 'etcd_cert_file', key: 'etcd_key_file' } as const;

/** The connection; TLS files it cannot use are reported by the netconf field that names them. */
function gatewayConnection(options: GatewayOptions, settings: EtcdSettings): GatewayConnection {
  try {
    return new GatewayConnection(options);
  } catch (err) {
    if (!(err instanceof TlsMaterialError)) throw err;
    const field = TLS_FIELDS[err.part];
    throw new EtcdSettingsError(field, `${settings[field] ?? 'the system trust store'}: ${err.message}`);
  }
}
