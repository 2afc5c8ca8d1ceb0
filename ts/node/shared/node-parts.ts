// The parts main makes once and every subsystem shares (subsystem.ts): the Kubernetes API, the
// datastore with its requests counted on the agent's metrics, the process's shared informers, and
// the cluster the datastore's watch keeps (nodes, blocks, pools and workloads with routes; blocks
// and pools alone for pool usage), followed through etcd's watch or the Kubernetes API's informers, and the
// same watch's blocks and pools as the CNI service's ADDs are decided on (ts/ipam/watched-ipam.ts).
import { WatchedIpam } from '../../ipam/watched-ipam.ts';
import type { Logger } from '../../log/logger.ts';
import type { Manager } from '../../runtime/manager.ts';
import { followKubernetes } from '../../store/kubernetes/follow.ts';
import type { Store } from '../../store/store.ts';
import { followCluster, ROUTE_PREFIXES, USAGE_PREFIXES } from './cluster-feed.ts';
import { countingStore } from './count-datastore.ts';
import { DatastoreMetrics } from './datastore-metrics.ts';
import { kubeConfigOf, openNodeStore } from './open-datastore.ts';
import { allPods, withPodsAsWorkloads } from './pods.ts';
import { routesGauge } from './routes-gauge.ts';
import type { NodeSettings } from './settings.ts';
import type { NodeParts } from './subsystem.ts';

/** Throws when the APIs cannot be reached (a kubeconfig that does not load, a datastore that cannot be opened). */
export async function openNodeParts(
  settings: NodeSettings,
  env: NodeJS.ProcessEnv,
  log: Logger,
  manager: Pick<Manager, 'add' | 'health' | 'metrics' | 'informers'>,
): Promise<NodeParts> {
  const { registry } = manager.metrics;
  const datastoreMetrics = new DatastoreMetrics(registry);
  // On /metrics whether or not this node programs routes (none: no sample).
  routesGauge(registry);
  const countStore = (store: Store) => countingStore(store, datastoreMetrics);
  const kube = kubeConfigOf(settings);
  const store = countStore(await openNodeStore(settings, env));
  const informers = manager.informers(kube);
  const watchedIpam = new WatchedIpam();
  // On the Kubernetes datastore the workloads are the pods (pods.ts).
  const follows =
    settings.datastoreType === 'kubernetes'
      ? withPodsAsWorkloads(followKubernetes(kube, informers), () => allPods(informers, kube))
      : store.follow?.bind(store);
  const follow = follows && watchedIpam.teed(follows);
  const feed = follow && followCluster(follow, settings.routes ? ROUTE_PREFIXES : USAGE_PREFIXES);
  return { settings, env, log, manager, informers, kube, store, countStore, feed, watchedIpam };
}

/** Once every subsystem and the manager have stopped. */
export function closeNodeParts(parts: NodeParts): void {
  parts.feed?.stop();
  parts.store.close();
}
