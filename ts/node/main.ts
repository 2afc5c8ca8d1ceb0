// netplug-node, the node agent (the DaemonSet's first container): subsystems that main only wires,
// on the resident programs' runtime (ts/runtime/: one manager with the health checks, metrics,
// shared informers and controllers):
// - startup/: the files the CNI plugin reads, ClusterInformation, the default pool, the node's
//   registration and labels, host-local's pod CIDRs;
// - pool-usage/: IPAM usage per pool on /metrics;
// - cni/: the CNI service on the agent's socket (FAST_PATH);
// and with NETPLUG_NETWORKING_BACKEND=routes:
// - addresses/: the node's tunnel addresses and published addresses (datastore writes only);
// - routes/: routes to other nodes' pods (the kernel only);
// - nat/: natOutgoing, the `nat` part of netplug's nftables table `inet netplug`.
// What they share (the followed cluster, the node's address, the table) is in shared/. Serves
// /livez, /readyz and /metrics, and /readiness as /readyz: netconfs' readiness_gates name it.
import { WatchedIpam } from '../ipam/watched-ipam.ts';
import type { Store } from '../store/store.ts';
import { describeError } from '../runtime/errors.ts';
import { programLog } from '../runtime/log.ts';
import { Manager } from '../runtime/manager.ts';
import { followKubernetes } from '../store/kubernetes/follow.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { nodeAddresses } from './addresses/addresses.ts';
import { cniService } from './cni/cni-service.ts';
import { NAT_PART, natOutgoing } from './nat/nat.ts';
import { poolUsage } from './pool-usage/pool-usage.ts';
import { routesToOtherNodes } from './routes/routes.ts';
import { followCluster, ROUTE_PREFIXES, USAGE_PREFIXES } from './shared/cluster-feed.ts';
import { countingStore } from './shared/count-datastore.ts';
import { DatastoreMetrics } from './shared/datastore-metrics.ts';
import { netplugTable } from './shared/netplug-table.ts';
import { routesGauge } from './shared/routes-gauge.ts';
import { kubeConfigOf, openNodeStore } from './shared/open-datastore.ts';
import { nodeSettings, type NodeSettings } from './shared/settings.ts';
import type { NodeParts, Subsystem } from './shared/subsystem.ts';
import { LocalAddress } from './shared/this-node.ts';
import { checkDefaultPool } from './startup/ensure-default-pool.ts';
import { keepFiles, startUp } from './startup/start-up.ts';

const PROGRAM = 'netplug-node';

/** Runs netplug-node until `signal` aborts; resolves to the exit code (0 after a clean stop). */
export async function runNodeMain(_argv: readonly string[], env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<number> {
  const write = (text: string) => process.stderr.write(text);
  let log = programLog(PROGRAM, write);
  let settings: NodeSettings;
  try {
    settings = nodeSettings(env);
    log = programLog(PROGRAM, write, settings.logLevel);
    checkDefaultPool(settings);
  } catch (err) {
    log.error(describeError(err));
    return 1;
  }
  log.info(`starting ${NETPLUG_VERSION} on node "${settings.nodeName}", datastore ${settings.datastoreType}`);
  if (!keepFiles(settings, log)) return 1;
  const health = { ...settings.health, aliases: { '/readiness': '/readyz' } as const };
  const manager = new Manager({ log, health, ...(settings.metrics ? { metricsAddress: settings.metrics } : {}) });
  const datastoreMetrics = new DatastoreMetrics(manager.metrics.registry);
  // On /metrics whether or not this node programs routes (none: no sample).
  routesGauge(manager.metrics.registry);
  const countStore = (store: Store) => countingStore(store, datastoreMetrics);
  let parts: NodeParts;
  try {
    const kube = kubeConfigOf(settings);
    const store = countStore(await openNodeStore(settings, env));
    const informers = manager.informers(kube);
    // The cluster routes, addresses and natOutgoing are computed from, and pool usage counted from;
    // the same watch of blocks and pools keeps what CNI ADDs are decided on (ts/ipam/watched-ipam.ts).
    const watchedIpam = new WatchedIpam();
    const follows = settings.datastoreType === 'kubernetes' ? followKubernetes(kube, informers) : store.follow?.bind(store);
    const follow = follows && watchedIpam.teed(follows);
    const feed = follow && followCluster(follow, settings.routes ? ROUTE_PREFIXES : USAGE_PREFIXES);
    parts = { settings, env, log, manager, informers, kube, store, countStore, feed, watchedIpam };
  } catch (err) {
    log.error(`cannot reach the APIs: ${describeError(err)}`);
    return 1;
  }

  const started = startUp(parts);
  const subsystems: Subsystem[] = [started, poolUsage(parts, started.done)];
  // netplug's table holds a part of each contributor named here (a policy subsystem adds its own).
  const table = settings.routes ? netplugTable([NAT_PART]) : undefined;
  if (table) {
    const { informers, kube } = parts;
    const address = new LocalAddress({ setting: settings.nodeAddress, name: settings.nodeName, log, informers, kube });
    subsystems.push(nodeAddresses(parts, address, started.done), routesToOtherNodes(parts, address, started.done));
    subsystems.push(natOutgoing(parts, table, started.done));
  }
  // Other subsystems' part in CNI calls (a policy subsystem's, before an ADD answers) goes in the hooks.
  subsystems.push(cniService(parts, {}));

  // The subsystems stop first (the CNI service waits for the calls it serves), then the manager.
  const failed = new AbortController();
  const stopping = new AbortController();
  const managed = manager.run(stopping.signal).finally(() => failed.abort());
  await Promise.all(subsystems.map((subsystem) => subsystem.run(AbortSignal.any([signal, failed.signal]))));
  stopping.abort();
  const code = await managed;
  await table?.close();
  parts.feed?.stop();
  parts.store.close();
  log.info('stopped');
  return code;
}
