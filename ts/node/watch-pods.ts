// The pods of this node and every namespace, as netplug-node's watches hold them, so that a pod's
// ADD served here reads neither from the API server (ts/plugin/early-kube.ts): two GETs per pod
// taken off an API server that a burst of pods keeps busy. The kubelet starts a pod's sandbox only
// after the pod was bound to this node, and this watch hears of it from the same API server at
// about the same time. A pod not held yet, another pod of that name (the uid differs), or any pod
// while a watch is out of step with the API, is read with GETs as before.
import * as k8s from '@kubernetes/client-node';

import { namespaceInfoOf, podInfoOf, type NamespaceInfo, type PodInfo } from '../k8s/objects.ts';
import { watchObjects, type WatchLog } from '../k8s/watch-objects.ts';

export interface WatchedPods {
  read(namespace: string, name: string, uid: string): [PodInfo, NamespaceInfo] | undefined;
  /** The pods held, 0 while a watch is out of step. */
  count(): number;
  stop(): Promise<void>;
}

export function watchPods(config: k8s.KubeConfig, nodeName: string, log: WatchLog): WatchedPods {
  const core = config.makeApiClient(k8s.CoreV1Api);
  const onNode = `spec.nodeName=${nodeName}`;
  const pods = watchObjects<k8s.V1Pod>(
    config,
    `the pods of node ${nodeName}`,
    '/api/v1/pods',
    () => core.listPodForAllNamespaces({ fieldSelector: onNode }),
    {},
    log,
    undefined,
    onNode,
  );
  const namespaces = watchObjects<k8s.V1Namespace>(config, 'namespaces', '/api/v1/namespaces', () => core.listNamespace(), {}, log);
  const inStep = () => pods.synced() && namespaces.synced();
  return {
    read(namespace, name, uid) {
      if (!inStep()) return undefined;
      const pod = pods.get(name, namespace);
      const inNamespace = namespaces.get(namespace);
      if (!pod || pod.metadata?.uid !== uid || !inNamespace) return undefined;
      return [podInfoOf(namespace, name, pod), namespaceInfoOf(namespace, inNamespace)];
    },
    count: () => (inStep() ? pods.list().length : 0),
    async stop() {
      await Promise.all([pods.stop(), namespaces.stop()]);
    },
  };
}
