// What wakes the reconcile loop: informers (list, then watch) on the Installation, the IP pools
// and netplug-system's workloads and ConfigMaps. They only trigger a pass, which reads the state
// afresh (level-triggered). An informer that fails (the API unreachable, a resource not installed
// yet) is started again with a growing delay (runtime/informers.ts), and one failing watch never
// stops the others.
import type * as k8s from '@kubernetes/client-node';

import { Informers } from '../runtime/informers.ts';
import type { OperatorLog } from './log.ts';
import { GROUP, SYSTEM_NAMESPACE } from './installation.ts';
import type { OperatorKube } from './open-kube.ts';

type Lister = () => Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>;

function watched(kube: OperatorKube): { what: string; path: string; list: Lister }[] {
  const custom = (group: string, plural: string) => ({
    what: `${plural}.${group}`,
    path: `/apis/${group}/v1/${plural}`,
    list: () =>
      kube.custom.listClusterCustomObject({ group, version: 'v1', plural }) as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>,
  });
  const namespace = SYSTEM_NAMESPACE;
  return [
    custom(GROUP, 'installations'),
    custom('crd.projectnet.org', 'ippools'),
    {
      what: `${namespace} DaemonSets`,
      path: `/apis/apps/v1/namespaces/${namespace}/daemonsets`,
      list: () => kube.apps.listNamespacedDaemonSet({ namespace }),
    },
    {
      what: `${namespace} Deployments`,
      path: `/apis/apps/v1/namespaces/${namespace}/deployments`,
      list: () => kube.apps.listNamespacedDeployment({ namespace }),
    },
    {
      what: `${namespace} ConfigMaps`,
      path: `/api/v1/namespaces/${namespace}/configmaps`,
      list: () => kube.core.listNamespacedConfigMap({ namespace }),
    },
  ];
}

/** Starts the informers; each change calls `trigger`, as does a watch failing. Resolves to a function that stops them. */
export function watchTriggers(kube: OperatorKube, trigger: () => void, log: OperatorLog): () => Promise<void> {
  const informers = new Informers(kube.config, { log });
  for (const source of watched(kube))
    informers.informer(source).addHandler({ add: trigger, update: () => trigger(), delete: trigger, failed: trigger });
  informers.start();
  return () => informers.stop();
}
