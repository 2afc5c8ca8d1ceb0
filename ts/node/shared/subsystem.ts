// What netplug-node's subsystems (ts/node/<subsystem>/) are given by main and share through the
// runtime: the settings and the log; the manager's health checks (each subsystem names its own),
// its metrics registry (each registers its own metrics there) and its controllers; the process's
// shared informers; the Kubernetes API; the datastore (counted, count-datastore.ts); the cluster
// as the datastore's watch keeps it. A subsystem imports none of the others:
// what two of them share lives here, in the runtime or in the layers below.
import type * as k8s from '@kubernetes/client-node';

import type { WatchedIpam } from '../../ipam/watched-ipam.ts';
import type { Logger } from '../../log/logger.ts';
import type { Informers } from '../../runtime/informers.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { Store } from '../../store/store.ts';
import type { ClusterFeed } from './cluster-feed.ts';
import type { NodeSettings } from './settings.ts';

export interface NodeParts {
  settings: NodeSettings;
  /** The agent's own environment (the proxy settings its clients follow, the CNI service's datastore). */
  env: NodeJS.ProcessEnv;
  log: Logger;
  manager: Pick<Manager, 'add' | 'health' | 'metrics'>;
  informers: Informers;
  kube: k8s.KubeConfig;
  store: Store;
  /** Counts a store's requests on the agent's datastore metrics (another connection than `store`'s). */
  countStore(store: Store): Store;
  /** Undefined where the datastore cannot be followed: then the cluster is read whole. */
  feed: ClusterFeed | undefined;
  /** The blocks and pools as the same watch keeps them, indexed for the CNI service's ADDs (ts/ipam/watched-ipam.ts). */
  watchedIpam: WatchedIpam;
}

/** A subsystem's own work besides the controllers the manager runs for it. */
export interface Subsystem {
  /** Runs until `signal` aborts; resolves once the subsystem has stopped. */
  run(signal: AbortSignal): Promise<void>;
}

/** Something to wait for before a controller runs (Manager.add's waitFor): the end of start-up. */
export interface Gate {
  whenSynced(): Promise<void>;
}
