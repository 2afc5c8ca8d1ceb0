// What netplug-operator reads, each from a shared informer's cache (runtime/informers.ts): the
// Installations and NetplugStatuses, the FlowLogAggregators and FlowViewers, the IP pools,
// netplug-system's workloads, template ConfigMap and pods, and kubeadm's ClusterConfiguration (the
// cluster's pod CIDRs). A reconcile reads these, never the API; it acts on what a cache lacks only
// once every cache is synced, and confirms with a fresh read before it creates or removes on that
// ground. Every one must be served: the controllers start once all are synced.
import type * as k8s from '@kubernetes/client-node';

import type { Informer, Informers } from '../runtime/informers.ts';
import type { PoolObject } from './desired-pools.ts';
import { AGGREGATOR_PLURAL, type FlowLogAggregator, type FlowViewer, VIEWER_PLURAL } from './flow-resources.ts';
import { CNI_CONFIG_MAP, GROUP, type Installation, type NetplugStatus, SYSTEM_NAMESPACE } from './installation.ts';
import type { OperatorKube } from './open-kube.ts';

export const KUBEADM_CONFIG = { namespace: 'kube-system', name: 'kubeadm-config' };

export interface OperatorCaches {
  installations: Informer<Installation>;
  statuses: Informer<NetplugStatus>;
  flowLogAggregators: Informer<FlowLogAggregator>;
  flowViewers: Informer<FlowViewer>;
  pools: Informer<PoolObject>;
  daemonSets: Informer<k8s.V1DaemonSet>;
  deployments: Informer<k8s.V1Deployment>;
  /** netplug-system/cni-config, the conflist template. */
  templates: Informer<k8s.V1ConfigMap>;
  /** netplug-system's pods (netplug-flows' among them). */
  pods: Informer<k8s.V1Pod>;
  /** kube-system/kubeadm-config. */
  kubeadm: Informer<k8s.V1ConfigMap>;
  /** Every one of them, for the controller to wait for. */
  all: readonly Informer<unknown>[];
  /** Whether every cache holds a complete list. */
  synced(): boolean;
}

type List = k8s.KubernetesListObject<k8s.KubernetesObject>;

export function operatorCaches(informers: Informers, kube: OperatorKube): OperatorCaches {
  const custom = <T>(group: string, plural: string): Informer<T> =>
    informers.informer<k8s.KubernetesObject>({
      what: `${plural}.${group}`,
      path: `/apis/${group}/v1/${plural}`,
      list: () => kube.custom.listClusterCustomObject({ group, version: 'v1', plural }) as Promise<List>,
    }) as unknown as Informer<T>;
  const namespace = SYSTEM_NAMESPACE;
  const templateSelector = `metadata.name=${CNI_CONFIG_MAP}`;
  const kubeadmSelector = `metadata.name=${KUBEADM_CONFIG.name}`;
  const caches = {
    installations: custom<Installation>(GROUP, 'installations'),
    statuses: custom<NetplugStatus>(GROUP, 'netplugstatuses'),
    flowLogAggregators: custom<FlowLogAggregator>(GROUP, AGGREGATOR_PLURAL),
    flowViewers: custom<FlowViewer>(GROUP, VIEWER_PLURAL),
    pools: custom<PoolObject>('crd.projectnet.org', 'ippools'),
    daemonSets: informers.informer<k8s.V1DaemonSet>({
      what: `${namespace} DaemonSets`,
      path: `/apis/apps/v1/namespaces/${namespace}/daemonsets`,
      list: () => kube.apps.listNamespacedDaemonSet({ namespace }),
    }),
    deployments: informers.informer<k8s.V1Deployment>({
      what: `${namespace} Deployments`,
      path: `/apis/apps/v1/namespaces/${namespace}/deployments`,
      list: () => kube.apps.listNamespacedDeployment({ namespace }),
    }),
    templates: informers.informer<k8s.V1ConfigMap>({
      what: `ConfigMap ${namespace}/${CNI_CONFIG_MAP}`,
      path: `/api/v1/namespaces/${namespace}/configmaps`,
      list: () => kube.core.listNamespacedConfigMap({ namespace, fieldSelector: templateSelector }),
      fieldSelector: templateSelector,
    }),
    pods: informers.informer<k8s.V1Pod>({
      what: `${namespace} pods`,
      path: `/api/v1/namespaces/${namespace}/pods`,
      list: () => kube.core.listNamespacedPod({ namespace }),
    }),
    kubeadm: informers.informer<k8s.V1ConfigMap>({
      what: `ConfigMap ${KUBEADM_CONFIG.namespace}/${KUBEADM_CONFIG.name}`,
      path: `/api/v1/namespaces/${KUBEADM_CONFIG.namespace}/configmaps`,
      list: () => kube.core.listNamespacedConfigMap({ namespace: KUBEADM_CONFIG.namespace, fieldSelector: kubeadmSelector }),
      fieldSelector: kubeadmSelector,
    }),
  };
  const all = Object.values(caches) as Informer<unknown>[];
  return { ...caches, all, synced: () => all.every((informer) => informer.synced()) };
}
