// The automatic host endpoints' controller (auto-host-endpoints.ts), reconciling
// KubeControllersConfiguration default, which owns them, from the Node cache. Every trigger is an
// event: the Node cache complete; a node added or deleted, or its labels or InternalIP addresses
// changed (status heartbeats do not count); the configuration changed (its status, which the
// reconcile writes itself, does not count); a host endpoint changed or removed. The configuration
// and the host endpoints are followed on the datastore itself (etcd's watch, or the Kubernetes
// API's). A resync every minute besides puts back what a missed event left.
import type * as k8s from '@kubernetes/client-node';

import { Controller, handlerFor } from '../runtime/controller.ts';
import type { Informer } from '../runtime/informers.ts';
import { changesOnlyStatus } from '../runtime/object-changes.ts';
import type { Log } from '../runtime/log.ts';
import type { RuntimeMetrics } from '../runtime/metrics.ts';
import type { FollowEvents, Following, Store } from '../store/store.ts';
import { HOST_ENDPOINTS } from '../model/host-endpoint.ts';
import { CONFIGURATION_KEY, CONFIGURATION_NAME } from '../model/kube-controllers-configuration.ts';
import { reconcileAutoHostEndpoints } from './auto-host-endpoints.ts';

const RESYNC_MS = 60_000;

export type Follow = (prefix: string, events: FollowEvents) => Following;

export function autoHostEndpointsController(options: {
  store: Store;
  nodes: Informer<k8s.V1Node>;
  nodeExists: (name: string) => Promise<boolean>;
  /** The datastore's watch of a prefix. */
  follow: Follow;
  log: Log;
  metrics: RuntimeMetrics;
}): { controller: Controller; stop(): void } {
  const { store, nodes, log } = options;
  const state = {
    store,
    nodes: () => (nodes.synced() ? nodes.list() : undefined),
    nodeExists: options.nodeExists,
    log,
    reported: new Set<string>(),
  };
  const key = CONFIGURATION_NAME;
  const controller = new Controller({
    name: 'host-endpoints',
    log,
    metrics: options.metrics,
    resyncMs: RESYNC_MS,
    settleMs: 100,
    keys: () => [key],
    reconcile: async () => {
      await reconcileAutoHostEndpoints(state);
      return undefined;
    },
  });
  const trigger = () => controller.trigger(key);
  nodes.addHandler(
    handlerFor<k8s.V1Node>(controller, () => key, { onSynced: [key] }),
    {
      significant: (node) => [node.metadata?.labels ?? {}, internalIPs(node)],
    },
  );

  const configurations = new Map<string, unknown>();
  const following = [
    options.follow(CONFIGURATION_KEY.slice(0, CONFIGURATION_KEY.lastIndexOf('/') + 1), {
      listed(entries) {
        configurations.clear();
        for (const entry of entries) configurations.set(entry.key, entry.value);
        trigger();
      },
      changed(entry) {
        const before = configurations.get(entry.key);
        configurations.set(entry.key, entry.value);
        if (before === undefined || !changesOnlyStatus(before, entry.value)) trigger();
      },
      removed(removedKey) {
        configurations.delete(removedKey);
        trigger();
      },
      // It lists again: that triggers.
      failed: () => undefined,
    }),
    options.follow(HOST_ENDPOINTS, { listed: trigger, changed: trigger, removed: trigger, failed: () => undefined }),
  ];
  return {
    controller,
    stop: () => {
      for (const f of following) f.stop();
    },
  };
}

const internalIPs = (node: k8s.V1Node) =>
  (node.status?.addresses ?? []).filter((address) => address.type === 'InternalIP').map((address) => address.address);
