// What netplug-node lends the plugin's core when it serves a CNI command (PluginServices): its own
// open datastore connections, when the netconf names the agent's own datastore, so a command needs
// no datastore credentials on the host; the pods its watch holds, and warm clients for the pods it
// does not; and IPAM turns per node in memory instead of the host-wide file lock.
import { statSync } from 'node:fs';

import type { Netconf } from '../../config/netconf.ts';
import { KnownNodes } from '../../ipam/known-nodes.ts';
import type { IpamTurns } from '../../ipam/turns.ts';
import { WaitingAdds } from '../../ipam/waiting-adds.ts';
import type { WatchedIpam } from '../../ipam/watched-ipam.ts';
import { openKubeClient, type KubeClient } from '../../k8s/client.ts';
import type { KubernetesSettings } from '../../k8s/kubeconfig.ts';
import type { LogFileOptions } from '../../log/logger.ts';
import { RotatingFile } from '../../log/rotating-file.ts';
import { urgently } from '../../net/http-client.ts';
import type { PluginServices } from '../../plugin/services.ts';
import type { Store } from '../../store/store.ts';
import { CNI_CONNECTIONS, StorePool } from './cni-store-pool.ts';
import { KubeStore } from '../../store/kubernetes/store.ts';
import { openNodeStore } from '../shared/open-datastore.ts';
import type { NodeSettings } from '../shared/settings.ts';

/** Clients kept per Kubernetes API the netconfs name (pod and namespace reads of ADDs). */
const KUBE_CLIENTS = 4;

export interface AgentServices {
  services: PluginServices;
  /** The agent's datastore connections for CNI commands. */
  pool: StorePool;
  close(): void;
}

export interface AgentServiceOptions {
  /** Applied to each datastore connection a command is lent (metrics). */
  wrapStore?: (store: Store) => Store;
  /** Told how many waiting ADDs each group commit served besides its own (metrics). */
  servedTogether?: (count: number) => void;
  /** The pods of this node as the agent's watch holds them (ts/node/cni/watch-pods.ts). */
  watchedPod?: PluginServices['watchedPod'];
  /** The blocks and pools as the agent's watch holds them: ADDs decide on them when their reads are old (etcd). */
  watched?: WatchedIpam;
}

export async function openAgentServices(
  settings: NodeSettings,
  env: NodeJS.ProcessEnv,
  { wrapStore = (s) => s, servedTogether, watchedPod, watched }: AgentServiceOptions = {},
): Promise<AgentServices> {
  const stores: Store[] = [];
  for (let i = 0; i < CNI_CONNECTIONS[settings.datastoreType]; i++) {
    const store = await openNodeStore(settings, env);
    stores.push(store);
    // One HTTP/2 connection carries every command's requests at once (cni-store-pool.ts).
    if (store instanceof KubeStore && store.client.multiplexed) break;
  }
  const pool = new StorePool(stores, wrapStore);
  const kubes = new KubeClients();
  // On etcd every fact an ADD is decided on is a condition of its commit, and revisions are ordered.
  const known = new KnownNodes(Date.now, settings.datastoreType === 'etcdv3' ? watched : undefined);
  const waiting = new WaitingAdds(servedTogether);
  const logFiles = new SharedLogFiles();
  return {
    services: {
      via: 'netplug-node',
      store: (conf) => (isAgentDatastore(conf, settings) ? Promise.resolve(pool.lend()) : undefined),
      kube: (kubeSettings) => kubes.client(kubeSettings),
      ...(watchedPod ? { watchedPod } : {}),
      logFile: (file) => logFiles.file(file),
      ipamTurns: nodeTurns(),
      knownNodes: (conf) => (isAgentDatastore(conf, settings) ? known : undefined),
      waitingAdds: (conf) => (isAgentDatastore(conf, settings) ? waiting : undefined),
    },
    pool,
    close: () => {
      pool.close();
      kubes.close();
      logFiles.close();
    },
  };
}

/**
 * Whether the netconf's datastore is the agent's own: the same type and, for etcd, the same
 * endpoints (or the same discovery domain). The agent then serves it with its own credentials.
 */
export function isAgentDatastore(
  conf: Pick<Netconf, 'datastore_type' | 'etcd_endpoints' | 'etcd_discovery_srv'>,
  settings: NodeSettings,
): boolean {
  if ((conf.datastore_type ?? 'etcdv3') !== settings.datastoreType) return false;
  if (settings.datastoreType === 'kubernetes') return true;
  const endpoints = (list: string | undefined) =>
    (list ?? '')
      .split(',')
      .map((e) => e.trim().replace(/\/+$/, ''))
      .filter(Boolean)
      .sort()
      .join(',');
  return (
    endpoints(conf.etcd_endpoints) === endpoints(settings.etcd.etcd_endpoints) &&
    (conf.etcd_discovery_srv ?? '') === (settings.etcd.etcd_discovery_srv ?? '')
  );
}

/**
 * The address manager's turns per node: one allocation or release at a time, in arrival order.
 * `waited` tells the work that another went first, so what it read before is stale. A turn's
 * datastore requests go ahead of other commands' on the shared connections: every ADD and DEL
 * queued for the node waits on it.
 */
export function nodeTurns(): IpamTurns {
  const tails = new Map<string, Promise<unknown>>();
  return <T>(node: string, work: (waited: boolean) => Promise<T>): Promise<T> => {
    const before = tails.get(node);
    const turn = (before ?? Promise.resolve()).then(() => urgently(() => work(before !== undefined)));
    const tail = turn.then(
      () => undefined,
      () => undefined,
    );
    tails.set(node, tail);
    void tail.then(() => {
      if (tails.get(node) === tail) tails.delete(node);
    });
    return turn;
  };
}

/**
 * The netconfs' log files, one open file per path and limits for every command served: a command
 * of its own would open the file, and list its directory for old rotations to prune, each time.
 * A file another process rotated away is still followed (RotatingFile reopens at its path).
 */
class SharedLogFiles {
  private readonly files = new Map<string, RotatingFile>();

  file(options: LogFileOptions): RotatingFile {
    const key = JSON.stringify([options.path, options.maxBytes, options.maxAgeDays, options.maxCount]);
    let file = this.files.get(key);
    if (!file) {
      file = new RotatingFile(options.path, options);
      this.files.set(key, file);
    }
    return file;
  }

  close(): void {
    for (const file of this.files.values()) file.close();
    this.files.clear();
  }
}

/**
 * Kubernetes API clients by the settings that reach the API, a few each, used in turn. A kubeconfig
 * file that changed (install-cni rewrites it) is read again, as a one-shot would.
 */
class KubeClients {
  private readonly bySettings = new Map<string, { stamp: number; clients: Promise<KubeClient>[]; next: number }>();

  client(settings: KubernetesSettings): Promise<KubeClient> | undefined {
    let stamp = 0;
    if (settings.kubeconfig) {
      try {
        stamp = statSync(settings.kubeconfig).mtimeMs;
      } catch {
        return undefined; // opened for the command, which reports the file as the one-shot does
      }
    }
    const key = JSON.stringify([settings.kubeconfig, settings.k8s_api_root]);
    let entry = this.bySettings.get(key);
    if (!entry || entry.stamp !== stamp) {
      entry = { stamp, clients: [], next: 0 };
      this.bySettings.set(key, entry);
    }
    const slot = entry.next++ % KUBE_CLIENTS;
    const kept = entry.clients[slot];
    if (kept) return kept.then(unclosable);
    const client = openKubeClient(settings);
    entry.clients[slot] = client;
    // A failure is not kept: the next command tries afresh.
    const { clients } = entry;
    client.catch(() => {
      if (clients[slot] === client) delete clients[slot];
    });
    return client.then(unclosable);
  }

  close(): void {
    for (const { clients } of this.bySettings.values())
      for (const client of clients)
        client?.then(
          (k) => k.close(),
          () => undefined,
        );
    this.bySettings.clear();
  }
}

/**
 * The client as a command sees it: shared, so the command's close() leaves it open, and already
 * connected, so its warmUp() sends nothing (a warm-up request would queue before the command's own).
 */
function unclosable(client: KubeClient): KubeClient {
  return new Proxy(client, {
    get(target, property) {
      if (property === 'close' || property === 'warmUp') return () => undefined;
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
