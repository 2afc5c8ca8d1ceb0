// netplug-operator (issue 11): makes the cluster match Installation "default" (defaults,
// validation, IP pools, netplug-system's objects by server-side apply, status), and removes what
// it made when the Installation is deleted. Runs until `signal` aborts (SIGTERM).
import { IMAGE_REPOSITORY, STANDARD_NODE_LAYOUT } from '../render/objects.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { lineLog, type OperatorLog, reason } from './log.ts';
import { openOperatorKube } from './open-kube.ts';
import { reconcileInstallations } from './reconcile-installation.ts';
import { runLoop } from './run-loop.ts';
import { watchTriggers } from './watch-triggers.ts';

/** A pass at least this often even when nothing is heard (level-triggered: a missed event is made up). */
const PERIOD_MS = 60_000;

/** Runs netplug-operator until `signal` aborts; resolves to the exit code. */
export function runOperatorMain(argv: readonly string[], env: NodeJS.ProcessEnv, signal: AbortSignal): Promise<number> {
  return runOperator(
    argv,
    env,
    signal,
    lineLog((line) => process.stderr.write(line)),
  );
}

/** runOperatorMain with the log given (tests collect it). */
export async function runOperator(argv: readonly string[], env: NodeJS.ProcessEnv, signal: AbortSignal, log: OperatorLog): Promise<number> {
  if (argv.length > 0) {
    log.error(
      `unexpected argument "${argv[0]}"; usage: netplug-operator (settings come from the environment: NETPLUG_IMAGE, NETPLUG_NODE_STATE_DIR, NETPLUG_CNI_LOG_FILE, KUBECONFIG)`,
    );
    return 2;
  }
  const image = env.NETPLUG_IMAGE || `${IMAGE_REPOSITORY}:${NETPLUG_VERSION}`;
  let kube: Awaited<ReturnType<typeof openOperatorKube>>;
  try {
    kube = await openOperatorKube(env);
  } catch (err) {
    log.error(`cannot reach the Kubernetes API: ${reason(err)}`);
    return 1;
  }
  log.info(`netplug-operator ${NETPLUG_VERSION} starting; netplug-system runs ${image}`);
  // Nodes whose layout differs from the standard one (the test cluster's) move netplug's files.
  const node = {
    stateDir: env.NETPLUG_NODE_STATE_DIR || STANDARD_NODE_LAYOUT.stateDir,
    cniLogFile: env.NETPLUG_CNI_LOG_FILE || STANDARD_NODE_LAYOUT.cniLogFile,
    agentSocket: env.NETPLUG_AGENT_SOCKET || STANDARD_NODE_LAYOUT.agentSocket,
    netnsDir: env.NETPLUG_NETNS_DIR || STANDARD_NODE_LAYOUT.netnsDir,
  };
  const operator = { kube, image, node, log };
  const loop = runLoop(() => reconcileInstallations(operator), PERIOD_MS, signal, log);
  const stopWatching = watchTriggers(kube, loop.trigger, log);
  await loop.finished;
  await stopWatching();
  kube.store.close();
  log.info('stopped');
  return 0;
}
