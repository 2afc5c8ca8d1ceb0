// netplug-node, the node agent (the DaemonSet's first container). At start and then kept: the
// nodename and MTU files the CNI plugin reads; ClusterInformation "default" (this release, the
// cluster type); the default pool when the datastore has none; on the etcd datastore, the node's
// Node resource with the Kubernetes Node's labels. Serves /liveness, /readiness and /metrics;
// ready once that start-up work is done and while the datastore answers. With USE_POD_CIDR=true
// (host-local) no default pool: it records its Node's pod CIDRs instead, and is not ready until
// there are some.
import { appendFileSync } from 'node:fs';
import type { Server } from 'node:http';

import type * as k8s from '@kubernetes/client-node';

import { CLUSTER_INFO_KEY } from '../model/cluster-information.ts';
import { ensureClusterInfo } from '../ipam/cluster-info.ts';
import { WatchedIpam } from '../ipam/watched-ipam.ts';
import { Logger } from '../log/logger.ts';
import { Informers } from '../runtime/informers.ts';
import { followKubernetes } from '../store/kubernetes/follow.ts';
import type { Store } from '../store/store.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { defaultPool, ensureDefaultPool, FALLBACK_POOL_CIDR } from './ensure-default-pool.ts';
import { followNode, labelsOf, sleep } from './follow-node.ts';
import { PodCidrRecord } from './follow-pod-cidrs.ts';
import { kubeConfigOf, openNodeStore } from './open-datastore.ts';
import { watchPods } from './watch-pods.ts';
import { readNodeLabels } from './read-node-labels.ts';
import { registerNode } from './register-node.ts';
import { countingStore } from './count-datastore.ts';
import { openAgentServices, type AgentServices } from './cni-services.ts';
import type { CallTimings } from './call-timings.ts';
import { serveCni, type CniServer } from './serve-cni.ts';
import { AgentMetrics } from './metrics.ts';
import { OBSERVE_POOLS_INTERVAL_MS, observePools } from './observe-pools.ts';
import { followCluster, ROUTE_PREFIXES, USAGE_PREFIXES } from './routes/cluster-feed.ts';
import { RouteSync } from './routes/sync-routes.ts';
import { NAT_PART } from './routes/nat-outgoing.ts';
import { NftComposer } from '../dataplane/nft-composer.ts';
import { NftTable } from '../dataplane/nftables.ts';
import { serveHealth } from './serve-health.ts';
import { NodeSettingsError, nodeSettings, type NodeSettings } from './settings.ts';
import { writeNodeFiles } from './write-node-files.ts';

/** How often the datastore is asked whether it answers (readiness), and the files checked. */
const CHECK_INTERVAL_MS = 10_000;
/** A datastore that has not answered by then counts as unreachable. */
const CHECK_TIMEOUT_MS = 5_000;
const FILES_INTERVAL_MS = 10_000;
const MAX_RETRY_MS = 30_000;

/** Runs netplug-node until `signal` aborts; resolves to the exit code (0 after a clean stop). */
export async function runNodeMain(_argv: readonly string[], env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<number> {
  const log = new Logger('netplug-node', (text) => process.stderr.write(text), process.pid);
  let settings: NodeSettings;
  try {
    settings = nodeSettings(env);
    // The pool's settings are checked now, not when a pool is first missing.
    defaultPool(settings.defaultPool.cidr ?? FALLBACK_POOL_CIDR, settings.defaultPool.blockSize);
  } catch (err) {
    if (!(err instanceof NodeSettingsError)) throw err;
    log.error(err.message);
    return 1;
  }
  log.info(`starting ${NETPLUG_VERSION} on node "${settings.nodeName}", datastore ${settings.datastoreType}`);
  if (!keepFiles(settings, log)) return 1;

  let started = false;
  let datastoreProblem: string | undefined = 'the datastore has not been checked yet';
  const podCidrs = settings.usePodCidr ? new PodCidrRecord(settings.varDir, settings.nodeName, log) : undefined;
  const metrics = new AgentMetrics();
  const servers: Server[] = [];
  const closeServers = () => Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  const health = {
    notReady: [() => datastoreProblem ?? (started ? podCidrs?.notReady() : 'start-up work is not done yet')],
    metrics,
  };
  for (const [address, serves] of [
    [settings.health, 'health'] as const,
    ...(settings.metrics ? [[settings.metrics, 'metrics'] as const] : []),
  ]) {
    try {
      servers.push(await serveHealth(address.host, address.port, health, serves));
    } catch (err) {
      log.error(`cannot serve ${serves} on ${address.host}:${address.port}: ${(err as Error).message}`);
      await closeServers();
      return 1;
    }
  }
  let store: Store;
  let kube: k8s.KubeConfig;
  try {
    kube = kubeConfigOf(settings);
    store = countingStore(await openNodeStore(settings, env), metrics);
  } catch (err) {
    log.error(`cannot reach the APIs: ${(err as Error).message}`);
    await closeServers();
    return 1;
  }

  // Routes to other nodes' pods (ts/node/routes/), from the end of start-up; not ready until programmed.
  // The cluster they depend on is followed by the datastore's watch (etcd's, or the Kubernetes API's),
  // and so are the blocks and pools that pool usage is counted from, routes or not.
  const routesLog = log.child('routes');
  const watchLog = settings.routes ? routesLog : log.child('pools');
  const informers = new Informers(kube, { log: watchLog });
  informers.start();
  // The same watch of blocks and pools also keeps what CNI ADDs are decided on (ts/ipam/watched-ipam.ts).
  const watched = new WatchedIpam();
  const follows = settings.datastoreType === 'kubernetes' ? followKubernetes(kube, informers) : store.follow?.bind(store);
  const follow = follows && watched.teed(follows);
  const feed = follow ? followCluster(follow, settings.routes ? ROUTE_PREFIXES : USAGE_PREFIXES) : undefined;
  const routes = settings.routes
    ? new RouteSync({
        datastore: settings.datastoreType,
        store,
        kube,
        nodeName: settings.nodeName,
        addressSetting: settings.nodeAddress,
        log: routesLog,
        metrics,
        ...(feed ? { feed, refreshMs: settings.routeRefreshMs } : {}),
        tables: netplugTable(),
      })
    : undefined;
  if (routes) health.notReady.push(() => routes.notReady());

  // The CNI fast path: a failure to serve leaves runtimes the one-shot plugin, so the agent goes on.
  let cni: { server: CniServer; services: AgentServices } | undefined;
  const pods = settings.fastPath ? watchPods(kube, settings.nodeName, log.child('pods')) : undefined;
  if (pods) metrics.countWatchedPodsWith(() => pods.count());
  const watchedPod = (namespace: string, name: string, uid: string) => {
    const found = pods?.read(namespace, name, uid);
    metrics.countPodRead(found ? 'watch' : 'api');
    return found;
  };
  if (settings.fastPath) {
    try {
      const services = await openAgentServices(settings, env, {
        wrapStore: (s) => countingStore(s, metrics),
        servedTogether: (count) => metrics.countServedTogether(count),
        watchedPod,
        watched,
      });
      const server = await serveCni({
        socketPath: settings.agentSocket,
        services: services.services,
        log: log.child('cni'),
        env,
        signal,
        observe: (command, result, seconds) => metrics.observeCni(command, result, seconds),
        declined: (kind) => metrics.countDeclined(kind),
        ...(settings.cniTimingsFile ? { timings: appendTimings(settings.cniTimingsFile, log) } : {}),
      });
      cni = { server, services };
      health.notReady.push(() => server.notReady());
    } catch (err) {
      log.error(`cannot serve CNI on ${settings.agentSocket}: ${(err as Error).message}; runtimes run the one-shot plugin`);
    }
  } else log.info('FAST_PATH is false: CNI is not served here; runtimes run the one-shot plugin');

  const checkDatastore = async () => {
    const problem = await answers(store);
    if (problem !== datastoreProblem) {
      if (problem) log.warning(`not ready: ${problem}`);
      else log.info(`${store.description} answers`);
    }
    datastoreProblem = problem;
  };
  const startUp = async () => {
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        await doStartUpWork(store, kube, settings, log);
        started = true;
        log.info('start-up work done');
        return;
      } catch (err) {
        log.warning(`start-up: ${(err as Error).message}; trying again`);
        await sleep(Math.min(1000 * 2 ** attempt, MAX_RETRY_MS), signal);
      }
    }
  };
  const startedUp = startUp();
  const tasks = [
    repeat(CHECK_INTERVAL_MS, checkDatastore, signal),
    repeat(
      FILES_INTERVAL_MS,
      async () => {
        keepFiles(settings, log);
        podCidrs?.keep();
      },
      signal,
    ),
    // From the end of start-up, which may have made the default pool.
    startedUp.then(() =>
      repeat(
        OBSERVE_POOLS_INTERVAL_MS,
        async () => {
          // Metrics only: a datastore that does not answer is reported by the readiness check.
          await observePools(store, metrics, feed).catch((err: Error) => log.debug(`pool usage: ${err.message}`));
        },
        signal,
      ),
    ),
    ...(podCidrs ? [followNode(kube, settings.nodeName, podCidrs.follower(), signal, log)] : []),
    ...(routes ? [startedUp.then(() => routes.run(signal))] : []),
    (async () => {
      await startedUp;
      if (started && settings.datastoreType === 'etcdv3') {
        await followNode(
          kube,
          settings.nodeName,
          {
            what: 'labels',
            select: labelsOf,
            onChange: async (labels) => {
              const done = await registerNode(store, settings.nodeName, labels);
              if (done !== 'unchanged') log.info(`node "${settings.nodeName}" ${done} with labels ${JSON.stringify(labels)}`);
            },
          },
          signal,
          log,
        );
      }
    })(),
  ];
  await Promise.all(tasks);
  await cni?.server.stop();
  cni?.services.close();
  await pods?.stop();
  await closeServers();
  feed?.stop();
  await informers.stop();
  store.close();
  log.info('stopped');
  return 0;
}

/** What must be in place before the node is ready; each step is idempotent, so a failed attempt is simply repeated. */
async function doStartUpWork(store: Store, kube: k8s.KubeConfig, settings: NodeSettings, log: Logger): Promise<void> {
  const info = await ensureClusterInfo(store, NETPLUG_VERSION, settings.clusterType);
  log.info(`ClusterInformation "default": netplugVersion ${info.netplugVersion}, clusterType ${info.clusterType}`);
  log.info(
    settings.usePodCidr
      ? "USE_POD_CIDR is true: no default pool (addresses come from each Node's spec.podCIDRs)"
      : await ensureDefaultPool(store, settings, kube, log),
  );
  if (settings.datastoreType === 'etcdv3') {
    const labels = await readNodeLabels(kube, settings.nodeName, log);
    const done = await registerNode(store, settings.nodeName, labels);
    log.info(`node "${settings.nodeName}" ${done === 'unchanged' ? 'registered already' : done} with labels ${JSON.stringify(labels)}`);
  }
}

/** Writes the nodename and MTU files if they differ; false (logged) if they cannot be written. */
function keepFiles(settings: NodeSettings, log: Logger): boolean {
  try {
    const changed = writeNodeFiles(settings.varDir, settings.nodeName);
    if (changed.length > 0) log.info(`wrote ${changed.join(', ')} in ${settings.varDir}`);
    return true;
  } catch (err) {
    log.error(`cannot write ${settings.varDir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    return false;
  }
}

/** Undefined when the datastore answers a read in time, else why not. */
async function answers(store: Store): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      store.get(CLUSTER_INFO_KEY),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS / 1000} s`)), CHECK_TIMEOUT_MS);
      }),
    ]);
    return undefined;
  } catch (err) {
    return `${store.description} does not answer: ${(err as Error).message}`;
  } finally {
    clearTimeout(timer);
  }
}

/** Appends each call's timings to `file`, a JSON object a line; a failure is logged once. */
function appendTimings(file: string, log: Logger): (timings: CallTimings) => void {
  let failed = false;
  return (timings) => {
    try {
      appendFileSync(file, `${JSON.stringify(timings)}\n`);
    } catch (err) {
      if (!failed) log.warning(`cannot write the CNI timings to ${file}: ${(err as Error).message}`);
      failed = true;
    }
  };
}

/** Runs `task` now and then every `ms` (after each run ends) until `signal` aborts. */
async function repeat(ms: number, task: () => Promise<void>, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    await task();
    await sleep(ms, signal);
  }
}

/** netplug's nftables table (`inet netplug`), written from the parts of its contributors: natOutgoing's today. */
function netplugTable(): NftComposer {
  return new NftComposer({ family: 'inet', name: 'netplug', contributors: [NAT_PART], writer: new NftTable('inet', 'netplug') });
}
