// netplug-kube-controllers: the cluster-wide clean-up of netplug's datastore, in the shape of
// controller-runtime controllers (one level-triggered, idempotent reconcile per concern):
// - ipam: releases the addresses of pods that no longer exist, after LEAK_GRACE_PERIOD;
// - node: releases the addresses, blocks and affinities of deleted nodes (and with etcd their
//   Node resources), and with etcd keeps Node resources' labels equal to the Kubernetes Nodes';
//   with KubeControllersConfiguration default's autoCreate Enabled, keeps a `<node>-auto-hep`
//   host endpoint per node (auto-host-endpoints*.ts).
// It watches Pods and Nodes through informers, serves /liveness and /readiness, and runs until
// `signal` aborts (exit 0).
import type { Server } from 'node:http';

import * as k8s from '@kubernetes/client-node';

import { keys } from '../model/keys.ts';
import type { Store } from '../store/store.ts';
import { lineLog, reason } from './log.ts';
import { openDatastore } from './open-datastore.ts';
import { startAutoHostEndpoints } from './auto-host-endpoints-loop.ts';
import { releaseDeletedNodes } from './release-deleted-nodes.ts';
import { releaseLeakedAddresses, type Candidates } from './release-leaked-addresses.ts';
import { runLoop, type Loop } from './run-loop.ts';
import { answersWithin, serveHealth } from './serve-health.ts';
import { controllersSettings, type ControllersSettings } from './settings.ts';
import { syncNodeLabels } from './sync-node-labels.ts';
import { exists, watchObjects, type WatchedObjects } from '../k8s/watch-objects.ts';

export interface ControllersOptions {
  /** Where log lines go (default: stderr). */
  writeLog?: (line: string) => void;
}

/** How long a readiness check waits for the datastore or the API server. */
const PROBE_MS = 3000;
/** The node controller's pass besides those its watch triggers. */
const NODE_PERIOD_MS = 60_000;

/** Runs netplug-kube-controllers until `signal` aborts; resolves to the exit code. */
export async function runControllersMain(
  _argv: readonly string[],
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  options: ControllersOptions = {},
): Promise<number> {
  const log = lineLog(options.writeLog ?? ((line) => process.stderr.write(line)));
  let settings: ControllersSettings;
  let store: Store;
  const config = new k8s.KubeConfig();
  try {
    settings = controllersSettings(env);
    if (settings.kubeconfig) config.loadFromFile(settings.kubeconfig);
    else config.loadFromCluster();
    store = await openDatastore(settings, env);
  } catch (err) {
    log.error(`cannot start: ${reason(err)}`);
    return 1;
  }
  const core = config.makeApiClient(k8s.CoreV1Api);
  const version = config.makeApiClient(k8s.VersionApi);
  log.info(
    `starting controllers ${[...settings.enabled].join(',')} on the ${settings.datastore.datastore_type} datastore (${store.description}); leak grace period ${settings.leakGraceMs / 1000} s`,
  );

  // Stopped by the caller's signal, or here when the health server cannot listen.
  const stop = new AbortController();
  const stopNow = () => stop.abort();
  if (signal.aborted) stop.abort();
  else signal.addEventListener('abort', stopNow, { once: true });
  const loops: Loop[] = [];
  const watches: WatchedObjects<k8s.KubernetesObject>[] = [];
  const podExists = (namespace: string, name: string) => exists(() => core.readNamespacedPod({ namespace, name }));

  if (settings.enabled.has('ipam')) {
    const candidates: Candidates = new Map();
    const pods = watchObjects<k8s.V1Pod>(
      config,
      'pods',
      '/api/v1/pods',
      () => core.listPodForAllNamespaces(),
      { synced: () => ipam.trigger() },
      log,
    );
    watches.push(pods);
    const repair = {
      store,
      podsSynced: pods.synced,
      podCached: (namespace: string, name: string) => pods.get(name, namespace) !== undefined,
      podExists,
      graceMs: settings.leakGraceMs,
      log,
    };
    // A leak is released between one and one and a half grace periods after it is first seen (at most a minute late).
    const period = Math.min(Math.max(settings.leakGraceMs / 2, 250), 60_000);
    const ipam = runLoop('ipam', () => releaseLeakedAddresses(repair, candidates).then(() => undefined), period, stop.signal, log);
    loops.push(ipam);
  }

  if (settings.enabled.has('node')) {
    const ownsNodes = settings.datastore.datastore_type === 'etcdv3';
    // Label changes, new and deleted nodes start a pass; status updates (frequent) do not.
    const labels = new Map<string, string>();
    const event = (verb: 'add' | 'update' | 'delete', object: k8s.V1Node) => {
      const name = object.metadata?.name ?? '';
      const now = JSON.stringify(object.metadata?.labels ?? {});
      hostEndpoints.nodeEvent(verb, object);
      if (verb === 'delete') labels.delete(name);
      else if (labels.get(name) === now) return;
      else labels.set(name, now);
      node.trigger();
    };
    const nodes = watchObjects<k8s.V1Node>(
      config,
      'nodes',
      '/api/v1/nodes',
      () => core.listNode(),
      {
        synced: () => {
          node.trigger();
          hostEndpoints.trigger();
        },
        event,
      },
      log,
    );
    watches.push(nodes);
    const cleanup = {
      store,
      ownsNodes,
      nodesSynced: nodes.synced,
      nodeCached: (name: string) => nodes.get(name) !== undefined,
      nodeExists: (name: string) => exists(() => core.readNode({ name })),
      podExists,
      keptReported: new Set<string>(),
      log,
    };
    const reconcile = async (): Promise<number | undefined> => {
      // A node the cache lacks (not yet seen, or deleted) reads as unknown: its resource is left as it is.
      const labelsOf = (name: string) => {
        const known = nodes.get(name);
        return known ? (known.metadata?.labels ?? {}) : undefined;
      };
      if (ownsNodes && nodes.synced()) await syncNodeLabels(store, labelsOf, log);
      return releaseDeletedNodes(cleanup);
    };
    const node = runLoop('node', reconcile, NODE_PERIOD_MS, stop.signal, log);
    loops.push(node);
    const hostEndpoints = startAutoHostEndpoints({ store, nodes, nodeExists: cleanup.nodeExists, signal: stop.signal, log });
    loops.push(hostEndpoints);
  }

  const problems = async (): Promise<string[]> => {
    const found = await Promise.all([
      answersWithin('the datastore', PROBE_MS, () => store.listKeys(keys.pools)),
      answersWithin('the Kubernetes API server', PROBE_MS, () => version.getCode()),
    ]);
    for (const loop of loops) if (loop.passes() === 0) found.push(`the ${loop.name} controller has not completed its first pass`);
    return found.filter((problem): problem is string => problem !== undefined);
  };
  let health: Server | undefined;
  let code = 0;
  try {
    health = await serveHealth(settings.health, { problems });
    log.info(`serving /liveness and /readiness on ${settings.health.host}:${settings.health.port}`);
  } catch (err) {
    log.error(`cannot serve /liveness and /readiness on ${settings.health.host}:${settings.health.port}: ${reason(err)}`);
    code = 1;
    stop.abort();
  }

  await new Promise<void>((resolve) =>
    stop.signal.aborted ? resolve() : stop.signal.addEventListener('abort', () => resolve(), { once: true }),
  );
  signal.removeEventListener('abort', stopNow);
  log.info('stopping');
  await Promise.all(watches.map((watch) => watch.stop().catch(() => undefined)));
  // A pass stuck on an unreachable datastore does not hold up the exit.
  await Promise.race([Promise.all(loops.map((loop) => loop.finished)), new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
  health?.closeAllConnections();
  await new Promise<void>((resolve) => (health ? health.close(() => resolve()) : resolve()));
  store.close();
  return code;
}
