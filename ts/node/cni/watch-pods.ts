// The pods of this node and every namespace, as netplug-node's watches hold them, so that a pod's
// ADD served here reads neither from the API server (ts/plugin/early-kube.ts): two GETs per pod
// taken off an API server that a burst of pods keeps busy. The kubelet starts a pod's sandbox only
// after the pod was bound to this node, and this watch hears of it from the same API server at
// about the same time. A pod not held yet, another pod of that name (the uid differs), or any pod
// while a watch is out of step with the API, is read with GETs as before.
import * as k8s from '@kubernetes/client-node';

import { namespaceInfoOf, podInfoOf, type NamespaceInfo, type PodInfo } from '../../k8s/objects.ts';
import type { Informers } from '../../runtime/informers.ts';

export interface WatchedPods {
  read(namespace: string, name: string, uid: string): [PodInfo, NamespaceInfo] | undefined;
  /** The pods held, 0 while a watch is out of step. */
  count(): number;
}

/** The watches are the agent's shared informers', started and stopped with them. */
export function watchPods(informers: Informers, config: k8s.KubeConfig, nodeName: string): WatchedPods {
  const core = config.makeApiClient(k8s.CoreV1Api);
  const onNode = `spec.nodeName=${nodeName}`;
  const pods = informers.informer<k8s.V1Pod>({
    what: `the pods of node ${nodeName}`,
    path: '/api/v1/pods',
    list: () => core.listPodForAllNamespaces({ fieldSelector: onNode }),
    fieldSelector: onNode,
  });
  const namespaces = informers.informer<k8s.V1Namespace>({
    what: 'namespaces',
    path: '/api/v1/namespaces',
    list: () => core.listNamespace(),
  });
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
  };
}
