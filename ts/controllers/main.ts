// netplug-kube-controllers: the cluster-wide clean-up of netplug's datastore, as controller-runtime
// controllers on the runtime (ts/runtime/): level-triggered, idempotent reconciles fed by shared
// informers, run only by the replica that holds the Lease (LEADER_ELECTION, on by default):
// - ipam: releases the addresses of pods that no longer exist, after LEAK_GRACE_PERIOD
//   (ipam-controller.ts);
// - node: releases the addresses, blocks and affinities of deleted nodes (and with etcd their
//   Node resources), and with etcd keeps Node resources' labels equal to the Kubernetes Nodes'
//   (node-controller.ts); with KubeControllersConfiguration default's autoCreate Enabled, keeps a
//   `<node>-auto-hep` host endpoint per node (auto-host-endpoints*.ts);
// - policy, profile, workloadendpoint (etcd only; ignored on the Kubernetes datastore, whose
//   objects netplug-node reads from the API): Kubernetes NetworkPolicies as `knp.default.<name>`
//   policies, Namespaces and ServiceAccounts as `kns.`/`ksa.` profiles, pods' labels on their
//   workload endpoints (policy-controller.ts, profile-controller.ts, workload-endpoint-controller.ts).
// Serves /livez, /readyz (the datastore and the API server answer, checked every few seconds;
// each controller has completed a reconcile, or another replica leads) and /metrics, and runs
// until `signal` aborts (exit 0).
import * as k8s from '@kubernetes/client-node';

import { keys } from '../model/keys.ts';
import { describeError } from '../runtime/errors.ts';
import { programLog } from '../runtime/log.ts';
import { Manager } from '../runtime/manager.ts';
import { followKubernetes } from '../store/kubernetes/follow.ts';
import type { Store } from '../store/store.ts';
import { autoHostEndpointsController, type Follow } from './auto-host-endpoints-controller.ts';
import { ipamController, podsInformer } from './ipam-controller.ts';
import { nodeController, nodeExists, nodesInformer } from './node-controller.ts';
import { openDatastore } from './open-datastore.ts';
import { networkPoliciesInformer, policyController } from './policy-controller.ts';
import { namespacesInformer, profileController, serviceAccountsInformer } from './profile-controller.ts';
import { workloadEndpointController } from './workload-endpoint-controller.ts';
import { controllersSettings, type ControllersSettings } from './settings.ts';

export interface ControllersOptions {
  /** Where log lines go (default: stderr). */
  writeLog?: (line: string) => void;
  /** How often the datastore and the API server are asked whether they answer (default 10 s). */
  checkIntervalMs?: number;
}

const PROGRAM = 'netplug-kube-controllers';
/** How long a readiness check waits for the datastore or the API server. */
const PROBE_MS = 3000;
const CHECK_INTERVAL_MS = 10_000;

/** Runs netplug-kube-controllers until `signal` aborts; resolves to the exit code. */
export async function runControllersMain(
  _argv: readonly string[],
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  options: ControllersOptions = {},
): Promise<number> {
  const write = options.writeLog ?? ((line: string) => process.stderr.write(line));
  let log = programLog(PROGRAM, write);
  let settings: ControllersSettings;
  let store: Store;
  const config = new k8s.KubeConfig();
  try {
    settings = controllersSettings(env);
    log = programLog(PROGRAM, write, settings.logLevel);
    if (settings.etcdDeprecation) log.warning(settings.etcdDeprecation);
    if (settings.kubeconfig) config.loadFromFile(settings.kubeconfig);
    else config.loadFromCluster();
    store = await openDatastore(settings, env);
  } catch (err) {
    log.error(`cannot start: ${describeError(err)}`);
    return 1;
  }
  const core = config.makeApiClient(k8s.CoreV1Api);
  const version = config.makeApiClient(k8s.VersionApi);
  const { leaderElection } = settings;
  if (settings.ignored.length > 0)
    log.info(
      `ignoring controllers ${settings.ignored.join(',')}: on the Kubernetes datastore netplug-node reads network policies, namespaces, service accounts and pods from the API itself`,
    );
  log.info(
    `starting controllers ${[...settings.enabled].join(',')} on the ${settings.datastore.datastore_type} datastore (${store.description}); leak grace period ${settings.leakGraceMs / 1000} s; ${leaderElection ? `leader election on Lease ${leaderElection.namespace}/${leaderElection.name} as ${leaderElection.identity}` : 'no leader election'}`,
  );

  const manager = new Manager({
    log,
    health: settings.health,
    ...(leaderElection ? { leaderElection: { config, settings: leaderElection } } : {}),
  });
  const { metrics } = manager;
  const informers = manager.informers(config);
  const interval = options.checkIntervalMs ?? CHECK_INTERVAL_MS;
  manager.health.poll('datastore', () => store.listKeys(keys.pools), {
    intervalMs: interval,
    timeoutMs: PROBE_MS,
    describe: (err) => `the datastore is unreachable: ${describeError(err)}`,
  });
  manager.health.poll('kubernetes-api', () => version.getCode(), {
    intervalMs: interval,
    timeoutMs: PROBE_MS,
    describe: (err) => `the Kubernetes API server is unreachable: ${describeError(err)}`,
  });

  const stops: (() => void)[] = [];
  if (settings.enabled.has('ipam')) {
    const pods = podsInformer(informers, core);
    const controller = ipamController({ store, pods, core, graceMs: settings.leakGraceMs, log, metrics });
    manager.add(controller, { waitFor: [pods] });
  }
  if (settings.enabled.has('node')) {
    const nodes = nodesInformer(informers, core);
    const ownsNodes = settings.datastore.datastore_type === 'etcdv3';
    manager.add(nodeController({ store, ownsNodes, nodes, core, log, metrics }), { waitFor: [nodes] });
    const follow: Follow = store.follow?.bind(store) ?? followKubernetes(config, informers);
    const hostEndpoints = autoHostEndpointsController({ store, nodes, nodeExists: nodeExists(core), follow, log, metrics });
    stops.push(hostEndpoints.stop);
    manager.add(hostEndpoints.controller, { waitFor: [nodes] });
  }

  if (settings.enabled.has('policy')) {
    const networking = config.makeApiClient(k8s.NetworkingV1Api);
    const policies = networkPoliciesInformer(informers, networking);
    manager.add(policyController({ store, policies, networking, log, metrics }), { waitFor: [policies] });
  }
  if (settings.enabled.has('profile')) {
    const namespaces = namespacesInformer(informers, core);
    const serviceAccounts = serviceAccountsInformer(informers, core);
    manager.add(profileController({ store, namespaces, serviceAccounts, core, log, metrics }), {
      waitFor: [namespaces, serviceAccounts],
    });
  }
  if (settings.enabled.has('workloadendpoint')) {
    const pods = podsInformer(informers, core);
    const follow: Follow = store.follow?.bind(store) ?? followKubernetes(config, informers);
    const endpoints = workloadEndpointController({ store, pods, follow, log, metrics });
    stops.push(endpoints.stop);
    manager.add(endpoints.controller, { waitFor: [pods] });
  }

  const code = await manager.run(signal);
  for (const stop of stops) stop();
  store.close();
  return code;
}
