// The Installation controller (runtime/controller.ts): one key per Installation, reconciled from
// the caches (caches.ts). "default" is made real (reconcile-installation.ts); any other is
// reported as not reconciled. Every event of what the reconcile reads brings "default" back:
// - an Installation changed, except in its status (the operator's own status writes);
// - a NetplugStatus added, changed other than in status, or deleted;
// - FlowLogAggregator "default" added, changed other than in status, or deleted (netplug-node's
//   flow logs follow it);
// - an IP pool; netplug-system's DaemonSet, Deployment or template, their status included (the
//   conditions follow the rollout); a pod of netplug-system added, deleted, relabelled, or
//   waiting for a reason that changed (CrashLoopBackOff, ImagePullBackOff);
// - kubeadm's ClusterConfiguration; each cache complete again after a failure.
// A resync every minute besides makes up for what a missed event left.
import type * as k8s from '@kubernetes/client-node';

import { type Clock, systemClock } from '../runtime/clock.ts';
import { Controller, handlerFor } from '../runtime/controller.ts';
import type { Log } from '../runtime/log.ts';
import type { RuntimeMetrics } from '../runtime/metrics.ts';
import type { OperatorCaches } from './caches.ts';
import { INSTALLATION, type Installation } from './installation.ts';
import { type Operator, reconcileInstallation, refuseOther } from './reconcile-installation.ts';

const RESYNC_MS = 60_000;

/** What of a pod the conditions and the clean-up read: its labels and why its containers wait. */
export const podSignificance = (pod: k8s.V1Pod) => [
  pod.metadata?.labels ?? {},
  [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].map(
    (status) => `${status.name}:${status.state?.waiting?.reason ?? ''}:${status.state?.waiting?.message ?? ''}`,
  ),
];

export function installationController(options: {
  operator: Operator;
  log: Log;
  metrics: RuntimeMetrics;
  clock?: Clock;
  resyncMs?: number;
}): Controller {
  const { operator, log } = options;
  const caches: OperatorCaches = operator.caches;
  const controller = new Controller({
    name: 'installation',
    log,
    metrics: options.metrics,
    clock: options.clock ?? systemClock,
    resyncMs: options.resyncMs ?? RESYNC_MS,
    settleMs: 100,
    keys: () => caches.installations.list().map((installation) => installation.metadata.name),
    reconcile: async (name) => {
      // A cache listing again may lack what exists: its `synced` event brings the key back.
      if (!caches.synced()) return undefined;
      const installation = caches.installations.get(name);
      if (!installation) return undefined;
      if (name !== INSTALLATION) {
        await refuseOther(operator, installation);
        return undefined;
      }
      const after = await reconcileInstallation(operator, installation);
      return after === undefined ? undefined : { requeueAfterMs: after };
    },
  });
  const toDefault = handlerFor<unknown>(controller, () => INSTALLATION, { onSynced: [INSTALLATION] });
  caches.installations.addHandler(
    handlerFor<Installation>(controller, (installation) => installation.metadata?.name, { onSynced: [INSTALLATION] }),
    { ignoreStatusOnly: true },
  );
  caches.statuses.addHandler(toDefault, { ignoreStatusOnly: true });
  caches.flowLogAggregators.addHandler(toDefault, { ignoreStatusOnly: true });
  for (const cache of [caches.pools, caches.daemonSets, caches.deployments, caches.templates, caches.kubeadm] as const)
    cache.addHandler(toDefault);
  caches.pods.addHandler(toDefault, { significant: podSignificance });
  return controller;
}
