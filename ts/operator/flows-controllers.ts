// The FlowLogAggregator and FlowViewer controllers (runtime/controller.ts), beside the
// Installation's: one key each, "default", the only name the API server accepts for either kind,
// reconciled at start and every resync even while no such object exists (so that what a deleted
// aggregator left is removed, and readiness does not wait for an object that may never come).
// The aggregator's reconcile (reconcile-flows.ts) is brought back by:
// - its FlowLogAggregator changed, except in its status (the operator's own status writes);
// - Installation "default" added, deleted, or marked for deletion;
// - netplug-system's DaemonSet netplug-node or Deployment netplug-flows, their status included;
// - a pod of netplug-flows added, deleted, relabelled, or waiting for a reason that changed;
// - each cache complete again after a failure.
// The viewer's (reconcile-viewer.ts) by its FlowViewer changed, except in its status; the
// FlowLogAggregator and Installation "default" added or deleted; Deployment netplug-flows or
// netplug-flow-viewer, their status included; a pod of the viewer as the aggregator's are.
import type * as k8s from '@kubernetes/client-node';

import { FLOW_VIEWER } from '../render/flow-viewer.ts';
import { FLOWS } from '../render/flows.ts';
import { NODE } from '../render/objects.ts';
import { type Clock, systemClock } from '../runtime/clock.ts';
import { Controller, handlerFor } from '../runtime/controller.ts';
import type { Log } from '../runtime/log.ts';
import type { RuntimeMetrics } from '../runtime/metrics.ts';
import { FLOWS_RESOURCE } from './flow-resources.ts';
import { podSignificance } from './installation-controller.ts';
import { INSTALLATION, type Installation } from './installation.ts';
import { type FlowsMemory, reconcileAggregator } from './reconcile-flows.ts';
import { reconcileViewer } from './reconcile-viewer.ts';
import type { Operator } from './reconcile-installation.ts';

const RESYNC_MS = 60_000;

interface Options {
  operator: Operator;
  log: Log;
  metrics: RuntimeMetrics;
  clock?: Clock;
  resyncMs?: number;
}

const controllerOf = (options: Options, name: string, reconcile: () => Promise<number | undefined>) => {
  const { caches } = options.operator;
  return new Controller({
    name,
    log: options.log,
    metrics: options.metrics,
    clock: options.clock ?? systemClock,
    resyncMs: options.resyncMs ?? RESYNC_MS,
    settleMs: 100,
    keys: () => [FLOWS_RESOURCE],
    reconcile: async (key) => {
      // A cache listing again may lack what exists: its `synced` event brings the key back.
      if (key !== FLOWS_RESOURCE || !caches.synced()) return undefined;
      const after = await reconcile();
      return after === undefined ? undefined : { requeueAfterMs: after };
    },
  });
};

export function flowLogAggregatorController(options: Options): Controller {
  const { caches } = options.operator;
  const memory: FlowsMemory = { removed: false };
  const controller = controllerOf(options, 'flowlogaggregator', () => reconcileAggregator(options.operator, memory));
  const toDefault = handlerFor<unknown>(controller, () => FLOWS_RESOURCE, { onSynced: [FLOWS_RESOURCE] });
  const named =
    <T extends { metadata?: { name?: string } }>(name: string) =>
    (object: T) =>
      object.metadata?.name === name ? FLOWS_RESOURCE : undefined;
  caches.flowLogAggregators.addHandler(toDefault, { ignoreStatusOnly: true });
  caches.installations.addHandler(handlerFor<Installation>(controller, named(INSTALLATION), { onSynced: [FLOWS_RESOURCE] }), {
    significant: (installation) => Boolean(installation.metadata.deletionTimestamp),
  });
  caches.daemonSets.addHandler(handlerFor<k8s.V1DaemonSet>(controller, named(NODE), { onSynced: [FLOWS_RESOURCE] }));
  caches.deployments.addHandler(handlerFor<k8s.V1Deployment>(controller, named(FLOWS), { onSynced: [FLOWS_RESOURCE] }));
  caches.pods.addHandler(
    handlerFor<k8s.V1Pod>(controller, (pod) => (pod.metadata?.labels?.['k8s-app'] === FLOWS ? FLOWS_RESOURCE : undefined), {
      onSynced: [FLOWS_RESOURCE],
    }),
    { significant: podSignificance },
  );
  return controller;
}

export function flowViewerController(options: Options): Controller {
  const { caches } = options.operator;
  const memory: FlowsMemory = { removed: false };
  const controller = controllerOf(options, 'flowviewer', () => reconcileViewer(options.operator, memory));
  const toDefault = handlerFor<unknown>(controller, () => FLOWS_RESOURCE, { onSynced: [FLOWS_RESOURCE] });
  caches.flowViewers.addHandler(toDefault, { ignoreStatusOnly: true });
  caches.flowLogAggregators.addHandler(
    handlerFor<unknown>(controller, () => FLOWS_RESOURCE),
    { ignoreStatusOnly: true },
  );
  caches.installations.addHandler(
    handlerFor<Installation>(controller, (installation) => (installation.metadata?.name === INSTALLATION ? FLOWS_RESOURCE : undefined)),
    { significant: (installation) => Boolean(installation.metadata.deletionTimestamp) },
  );
  caches.deployments.addHandler(
    handlerFor<k8s.V1Deployment>(controller, (deployment) =>
      deployment.metadata?.name === FLOWS || deployment.metadata?.name === FLOW_VIEWER ? FLOWS_RESOURCE : undefined,
    ),
  );
  caches.pods.addHandler(
    handlerFor<k8s.V1Pod>(controller, (pod) => (pod.metadata?.labels?.['k8s-app'] === FLOW_VIEWER ? FLOWS_RESOURCE : undefined)),
    { significant: podSignificance },
  );
  return controller;
}
