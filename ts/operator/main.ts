// netplug-operator: makes the cluster match Installation "default" (defaults, validation, IP pools,
// netplug-system's objects by server-side apply, status with conditions that say why), and removes
// what it made when the Installation is deleted; with FlowLogAggregator "default" it runs
// netplug-flows and turns netplug-node's flow logs on, and reports FlowViewer "default" as not
// available (flows-controllers.ts). Controllers on the runtime (ts/runtime/): one
// level-triggered, idempotent reconcile per Installation (installation-controller.ts) fed by
// shared informers whose caches it reads (caches.ts), run only by the replica that holds Lease
// netplug-operator (LEADER_ELECTION, on by default). Serves /livez, /readyz (the API server
// answers; the controller has completed a reconcile, or another replica leads) and /metrics, and
// runs until `signal` aborts (exit 0).
import * as k8s from '@kubernetes/client-node';

import { describeError } from '../runtime/errors.ts';
import { programLog } from '../runtime/log.ts';
import { Manager } from '../runtime/manager.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { operatorCaches } from './caches.ts';
import { flowLogAggregatorController, flowViewerController } from './flows-controllers.ts';
import { installationController } from './installation-controller.ts';
import { openOperatorKube, type OperatorKube } from './open-kube.ts';
import { DEFAULT_WAITS, type Operator, type Waits } from './reconcile-installation.ts';
import { type OperatorSettings, operatorSettings } from './settings.ts';

export interface OperatorOptions {
  /** Where log lines go (default: stderr). */
  writeLog?: (line: string) => void;
  /** How often the API server is asked whether it answers (default 10 s). */
  checkIntervalMs?: number;
  /** How soon to look again at what no event announces (tests shorten them). */
  waits?: Partial<Waits>;
  /** How often every Installation is reconciled even when nothing is heard (default 1 min). */
  resyncMs?: number;
}

const PROGRAM = 'netplug-operator';
const USAGE = `usage: ${PROGRAM} (settings come from the environment: NETPLUG_IMAGE, NETPLUG_NODE_STATE_DIR, NETPLUG_CNI_LOG_FILE, NETPLUG_AGENT_SOCKET, NETPLUG_OPERATOR_HEALTH_ADDR, LEADER_ELECTION, KUBECONFIG)`;
/** How long a readiness check waits for the API server. */
const PROBE_MS = 3000;
const CHECK_INTERVAL_MS = 10_000;

/** Runs netplug-operator until `signal` aborts; resolves to the exit code. */
export async function runOperatorMain(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  options: OperatorOptions = {},
): Promise<number> {
  const write = options.writeLog ?? ((line: string) => process.stderr.write(line));
  let log = programLog(PROGRAM, write);
  if (argv.length > 0) {
    log.error(`unexpected argument "${argv[0]}"; ${USAGE}`);
    return 2;
  }
  let settings: OperatorSettings;
  let kube: OperatorKube;
  try {
    settings = operatorSettings(env);
    log = programLog(PROGRAM, write, settings.logLevel);
    kube = await openOperatorKube(env);
  } catch (err) {
    log.error(`cannot start: ${describeError(err)}`);
    return 1;
  }
  const { leaderElection } = settings;
  log.info(
    `netplug-operator ${NETPLUG_VERSION} starting; netplug-system runs ${settings.image}; ${leaderElection ? `leader election on Lease ${leaderElection.namespace}/${leaderElection.name} as ${leaderElection.identity}` : 'no leader election'}`,
  );

  const manager = new Manager({
    log,
    health: settings.health,
    ...(leaderElection ? { leaderElection: { config: kube.config, settings: leaderElection } } : {}),
  });
  const version = kube.config.makeApiClient(k8s.VersionApi);
  manager.health.poll('kubernetes-api', () => version.getCode(), {
    intervalMs: options.checkIntervalMs ?? CHECK_INTERVAL_MS,
    timeoutMs: PROBE_MS,
    describe: (err) => `the Kubernetes API server is unreachable: ${describeError(err)}`,
  });
  const caches = operatorCaches(manager.informers(kube.config), kube);
  const operator: Operator = {
    kube,
    caches,
    image: settings.image,
    node: settings.node,
    log,
    waits: { ...DEFAULT_WAITS, ...options.waits },
  };
  const controllerOptions = {
    operator,
    log,
    metrics: manager.metrics,
    ...(options.resyncMs === undefined ? {} : { resyncMs: options.resyncMs }),
  };
  for (const controller of [
    installationController(controllerOptions),
    flowLogAggregatorController(controllerOptions),
    flowViewerController(controllerOptions),
  ])
    manager.add(controller, { waitFor: caches.all });

  const code = await manager.run(signal);
  kube.store.close();
  log.info('stopped');
  return code;
}
