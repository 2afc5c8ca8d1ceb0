// The node controller: releases what deleted nodes left in the datastore (release-deleted-nodes.ts)
// and, with etcd, keeps Node resources' labels equal to the Kubernetes Nodes' (sync-node-labels.ts),
// reconciling one key (every node the datastore knows) from the Node cache. A pass comes when the
// cache is complete, when a node is added or deleted or its labels change (status heartbeats do not
// count), when a deleted node's pods may be gone (requeueAfter), and every minute besides. After a
// node is deleted, ClusterInformation's version is brought to the lowest the remaining nodes
// record (the deleted node may have been the last on an older release, and the agents compute it
// only as they start); on the first pass too, for deletions while no replica ran.
import type * as k8s from '@kubernetes/client-node';

import { Controller, handlerFor } from '../runtime/controller.ts';
import { exists } from '../runtime/errors.ts';
import type { Informer, Informers } from '../runtime/informers.ts';
import type { Log } from '../runtime/log.ts';
import type { RuntimeMetrics } from '../runtime/metrics.ts';
import { settleClusterVersion } from '../ipam/cluster-info.ts';
import type { Store } from '../store/store.ts';
import { releaseDeletedNodes } from './release-deleted-nodes.ts';
import { syncNodeLabels } from './sync-node-labels.ts';

/** The one key: every node the datastore knows. */
const NODES_KEY = 'nodes';
const RESYNC_MS = 60_000;

/** The cluster's Nodes: one cache for the node and host endpoint controllers. */
export function nodesInformer(informers: Informers, core: k8s.CoreV1Api): Informer<k8s.V1Node> {
  return informers.informer<k8s.V1Node>({ what: 'nodes', path: '/api/v1/nodes', list: () => core.listNode() });
}

export const nodeExists = (core: k8s.CoreV1Api) => (name: string) => exists(() => core.readNode({ name }));

export function nodeController(options: {
  store: Store;
  /** Whether the datastore has Node resources of its own (etcd), or reads the cluster's (Kubernetes). */
  ownsNodes: boolean;
  nodes: Informer<k8s.V1Node>;
  core: k8s.CoreV1Api;
  log: Log;
  metrics: RuntimeMetrics;
}): Controller {
  const { store, ownsNodes, nodes, core, log } = options;
  const cleanup = {
    store,
    ownsNodes,
    nodesSynced: () => nodes.synced(),
    nodeCached: (name: string) => nodes.get(name) !== undefined,
    nodeExists: nodeExists(core),
    podExists: (namespace: string, name: string) => exists(() => core.readNamespacedPod({ namespace, name })),
    keptReported: new Set<string>(),
    log,
  };
  // A node the cache lacks (not yet seen, or deleted) reads as unknown: its resource is left as it is.
  const labelsOf = (name: string) => {
    const known = nodes.get(name);
    return known ? (known.metadata?.labels ?? {}) : undefined;
  };
  /** The nodes of the last pass, to see one go; undefined until the first pass settled the version. */
  let lastNodes: Set<string> | undefined;
  const controller = new Controller({
    name: 'node',
    log,
    metrics: options.metrics,
    resyncMs: RESYNC_MS,
    settleMs: 100,
    keys: () => [NODES_KEY],
    reconcile: async () => {
      if (ownsNodes && nodes.synced()) await syncNodeLabels(store, labelsOf, log);
      const now = new Set(nodes.list().map((node) => node.metadata?.name ?? ''));
      const wait = await releaseDeletedNodes(cleanup);
      if (!lastNodes || [...lastNodes].some((name) => !now.has(name))) {
        const changed = await settleClusterVersion(store);
        if (changed)
          log.info(`ClusterInformation "default": netplugVersion ${changed.from || '(none)'} → ${changed.to}, the lowest the nodes record`);
      }
      // Kept while a deleted node's data waits (its Node resource, with etcd, goes last), so that
      // every pass until then settles again, the one that removes it included.
      if (wait === undefined) lastNodes = now;
      return wait === undefined ? undefined : { requeueAfterMs: wait };
    },
  });
  nodes.addHandler(
    handlerFor<k8s.V1Node>(controller, () => NODES_KEY, { onSynced: [NODES_KEY] }),
    {
      significant: (node) => node.metadata?.labels ?? {},
    },
  );
  return controller;
}
