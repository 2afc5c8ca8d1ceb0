// What wakes the reconcile loop: informers (list, then watch) on the Installation, the IP pools
// and netplug-system's workloads and ConfigMaps. They only trigger a pass, which reads the state
// afresh (level-triggered). The library's informer stops on an error (the API unreachable, a
// resource not installed yet): it is started again with a growing delay, and one failing watch
// never stops the others.
import * as k8s from '@kubernetes/client-node';

import { type OperatorLog, reason } from './log.ts';
import { GROUP, SYSTEM_NAMESPACE } from './installation.ts';
import type { OperatorKube } from './open-kube.ts';

const FIRST_RETRY_MS = 500;
const LAST_RETRY_MS = 30_000;

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

/** Starts the informers; each change calls `trigger`. Resolves to a function that stops them. */
export function watchTriggers(kube: OperatorKube, trigger: () => void, log: OperatorLog): () => Promise<void> {
  const stops = watched(kube).map(({ what, path, list }) => {
    const informer = k8s.makeInformer(kube.config, path, list);
    let stopped = false;
    let failed = false;
    let delay = FIRST_RETRY_MS;
    let retry: NodeJS.Timeout | undefined;
    const start = () => {
      failed = false;
      informer.start().then(
        () => {
          if (!failed && !stopped) delay = FIRST_RETRY_MS;
        },
        (err: unknown) => fail(err),
      );
    };
    const fail = (err: unknown) => {
      if (stopped || failed) return;
      failed = true;
      log.warning(`watching ${what} failed (${reason(err)}); trying again in ${delay / 1000} s`);
      retry = setTimeout(start, delay);
      delay = Math.min(delay * 2, LAST_RETRY_MS);
      trigger();
    };
    informer.on('error', fail);
    for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, () => trigger());
    start();
    return async () => {
      stopped = true;
      clearTimeout(retry);
      await informer.stop();
    };
  });
  return async () => {
    await Promise.all(stops.map((stop) => stop()));
  };
}
