// netplug's datastore for the controllers: etcd from ETCD_*, or the Kubernetes API's custom
// resources through the kubeconfig in KUBECONFIG, else (in a pod) the pod's service account.
import { inClusterClient } from '../k8s/in-cluster.ts';
import { openGrpcStore } from '../store/etcd/grpc.ts';
import { openStore } from '../store/open.ts';
import { KubeStore } from '../store/kubernetes/store.ts';
import type { Store } from '../store/store.ts';
import type { ControllersSettings } from './settings.ts';

export async function openDatastore(settings: ControllersSettings, env: NodeJS.ProcessEnv): Promise<Store> {
  if (settings.datastore.datastore_type === 'kubernetes' && !settings.kubeconfig)
    return new KubeStore(inClusterClient(env, 'netplug-kube-controllers'));
  // etcd over gRPC, as netplug-node: a resident program loads grpc-js once (store/etcd/grpc.ts).
  if ((settings.datastore.datastore_type ?? 'etcdv3') === 'etcdv3') return openGrpcStore(settings.datastore);
  return openStore(settings.datastore);
}
