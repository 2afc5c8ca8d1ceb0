// The ipam controller: releases the addresses of pods that no longer exist, after the grace period
// (release-leaked-addresses.ts), reconciling one key (every allocation in the datastore) from the
// pod cache. A pass comes when the pod cache is complete, when a pod is deleted (its addresses
// become candidates now rather than at the next resync), when the earliest candidate's grace
// period ends (requeueAfter), and every resync period besides: addresses whose pod never existed
// come with no event.
import type * as k8s from '@kubernetes/client-node';

import { Controller, handlerFor } from '../runtime/controller.ts';
import { exists } from '../runtime/errors.ts';
import type { Informer, Informers } from '../runtime/informers.ts';
import type { Log } from '../runtime/log.ts';
import type { RuntimeMetrics } from '../runtime/metrics.ts';
import type { Store } from '../store/store.ts';
import { releaseLeakedAddresses, type Candidates } from './release-leaked-addresses.ts';

/** The one key: every allocation of the datastore. */
const IPAM_KEY = 'addresses';

export function podsInformer(informers: Informers, core: k8s.CoreV1Api): Informer<k8s.V1Pod> {
  return informers.informer<k8s.V1Pod>({ what: 'pods', path: '/api/v1/pods', list: () => core.listPodForAllNamespaces() });
}

export function ipamController(options: {
  store: Store;
  pods: Informer<k8s.V1Pod>;
  core: k8s.CoreV1Api;
  graceMs: number;
  log: Log;
  metrics: RuntimeMetrics;
}): Controller {
  const { store, pods, core, graceMs, log } = options;
  const candidates: Candidates = new Map();
  const repair = {
    store,
    podsSynced: () => pods.synced(),
    podCached: (namespace: string, name: string) => pods.get(name, namespace) !== undefined,
    podExists: (namespace: string, name: string) => exists(() => core.readNamespacedPod({ namespace, name })),
    graceMs,
    log,
  };
  const controller = new Controller({
    name: 'ipam',
    log,
    metrics: options.metrics,
    // A leak that no event announces is seen within half a grace period (at most a minute).
    resyncMs: Math.min(Math.max(graceMs / 2, 250), 60_000),
    settleMs: 100,
    keys: () => [IPAM_KEY],
    reconcile: async () => {
      const next = await releaseLeakedAddresses(repair, candidates);
      return next === undefined ? undefined : { requeueAfterMs: next };
    },
  });
  const trigger = handlerFor<k8s.V1Pod>(controller, () => IPAM_KEY, { onSynced: [IPAM_KEY] });
  pods.addHandler({ delete: trigger.delete, synced: trigger.synced });
  return controller;
}
