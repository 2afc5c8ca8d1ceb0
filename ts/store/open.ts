// Opens the datastore the settings name. Only etcd for now; the Kubernetes datastore comes later.
import { EtcdClient } from './etcd/client.ts';
import { GatewayConnection } from './etcd/http.ts';
import { gatewayOptions, type EtcdSettings } from './etcd/options.ts';
import { EtcdStore } from './etcd/store.ts';
import type { Store } from './store.ts';
import { StoreError } from './store.ts';

export interface DatastoreSettings extends EtcdSettings {
  datastore_type?: string | undefined;
}

export async function openStore(settings: DatastoreSettings): Promise<Store> {
  const type = settings.datastore_type ?? 'etcdv3';
  if (type !== 'etcdv3') throw new StoreError(`datastore_type "${type}" is not available in this release; use "etcdv3"`);
  return new EtcdStore(new EtcdClient(new GatewayConnection(await gatewayOptions(settings))));
}
