// How netplug-node reaches its two APIs: the Kubernetes API through @kubernetes/client-node (the
// Node it follows, kubeadm's ConfigMap), and netplug's datastore through ts/store (etcd over gRPC,
// or the Kubernetes API's custom resources). KUBECONFIG names a kubeconfig (tests, or outside a
// pod); else the pod's service account is used, as client-go's in-cluster configuration does.
import * as k8s from '@kubernetes/client-node';

import { openKubeClient } from '../../k8s/client.ts';
import { inClusterClient } from '../../k8s/in-cluster.ts';
import { openHttp2 } from '../../net/http2-client.ts';
import { openGrpcStore } from '../../store/etcd/grpc.ts';
import { KubeStore } from '../../store/kubernetes/store.ts';
import type { Store } from '../../store/store.ts';
import type { NodeSettings } from './settings.ts';

export function kubeConfigOf(settings: NodeSettings): k8s.KubeConfig {
  const config = new k8s.KubeConfig();
  if (settings.kubeconfig) config.loadFromFile(settings.kubeconfig);
  else config.loadFromCluster();
  return config;
}

export async function openNodeStore(settings: NodeSettings, env: NodeJS.ProcessEnv): Promise<Store> {
  // etcd over gRPC: a resident agent loads grpc-js once and every request is about half as long (grpc.ts).
  if (settings.datastoreType === 'etcdv3') return openGrpcStore(settings.etcd);
  // On the Kubernetes API, one HTTP/2 connection carries every request at once (ts/net/http2-client.ts).
  if (settings.kubeconfig) return new KubeStore(await openKubeClient({ kubeconfig: settings.kubeconfig }, { multiplexWith: openHttp2 }));
  return new KubeStore(inClusterClient(env, 'netplug-node', { multiplexWith: openHttp2 }));
}
