// Every pod of the cluster, as netplug-node keeps them: one informer of the process (one list and
// one watch of /api/v1/pods), shared by the policy subsystem (pods are the peers selectors name)
// and, on the Kubernetes datastore, the cluster feed (where pods run, their addresses and floating
// IPs: workloads.ts). Its cache keeps only what those read, a tenth of a pod as the API server
// gives it.
import * as k8s from '@kubernetes/client-node';

import { keys } from '../../model/keys.ts';
import { ANNOTATIONS } from '../../model/pod-annotations.ts';
import type { Informer, Informers } from '../../runtime/informers.ts';
import type { Entry } from '../../store/store.ts';
import type { Follow } from './cluster-feed.ts';

export function allPods(informers: Informers, kube: k8s.KubeConfig): Informer<k8s.KubernetesObject> {
  const core = kube.makeApiClient(k8s.CoreV1Api);
  return informers.informer<k8s.KubernetesObject>({
    what: 'pods',
    path: '/api/v1/pods',
    list: () => core.listPodForAllNamespaces() as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>,
    view: { name: 'node', of: podAsNodeSees },
  });
}

/** What netplug-node reads of a pod: identity, labels, node, service account, ports, phase, addresses, floating IPs. */
function podAsNodeSees(object: k8s.KubernetesObject): k8s.KubernetesObject {
  const pod = object as k8s.V1Pod;
  const { name, namespace, uid, labels, resourceVersion, deletionTimestamp } = pod.metadata ?? {};
  const floating = pod.metadata?.annotations?.[ANNOTATIONS.floatingIPs];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace,
      uid,
      labels,
      resourceVersion,
      deletionTimestamp,
      ...(floating !== undefined ? { annotations: { [ANNOTATIONS.floatingIPs]: floating } } : {}),
    },
    spec: {
      nodeName: pod.spec?.nodeName,
      hostNetwork: pod.spec?.hostNetwork,
      serviceAccountName: pod.spec?.serviceAccountName,
      containers: (pod.spec?.containers ?? []).map((c) => ({ name: c.name, ports: c.ports })),
    },
    status: { phase: pod.status?.phase, podIP: pod.status?.podIP, podIPs: pod.status?.podIPs },
  } as k8s.KubernetesObject;
}

/**
 * `follow`, with the workload endpoints' prefix followed as the pods (the Kubernetes datastore's
 * cluster feed): one entry per pod, `<prefix><namespace>/<pod>`, the pod as kept its value.
 * Only a change of what workloads.ts reads of a pod is passed on (not its labels).
 */
export function withPodsAsWorkloads(follow: Follow, podsInformer: () => Informer<k8s.KubernetesObject>): Follow {
  return (prefix, events) => {
    if (prefix !== keys.workloadEndpoints) return follow(prefix, events);
    // Made on first use: an agent that follows no workloads watches no pods for it.
    const pods = podsInformer();
    const entry = (pod: k8s.KubernetesObject): Entry<unknown> => ({
      key: `${prefix}${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
      revision: pod.metadata?.resourceVersion ?? '0',
      value: pod,
    });
    const changed = (pod: k8s.KubernetesObject) => events.changed(entry(pod));
    const remove = pods.addHandler(
      {
        synced: () => events.listed(pods.list().map(entry)),
        add: changed,
        update: changed,
        delete: (pod) => events.removed(entry(pod).key),
        failed: (err) => events.failed(err),
      },
      { significant: placement },
    );
    return { stop: remove };
  };
}

/** What of a pod says where it runs and what reaches it. */
function placement(object: k8s.KubernetesObject): unknown {
  const pod = object as k8s.V1Pod;
  return [
    pod.spec?.nodeName,
    pod.spec?.hostNetwork,
    pod.status?.phase,
    pod.status?.podIP,
    pod.status?.podIPs,
    pod.metadata?.annotations?.[ANNOTATIONS.floatingIPs],
  ];
}
