// One reconcile of Installation "default": level-triggered, so it reads the whole state from
// the caches and makes the cluster match it; idempotent (server-side apply, writes only when
// something differs). Order: aliases, defaults and validation (a bad Installation is reported as
// Degraded and nothing that runs is touched), the defaults and the finalizer written back, pools,
// netplug-system's objects (netplug-node with flow logs on while FlowLogAggregator "default" has
// netplug-flows running: flow-resources.ts' nodeFlowLogs), then the conditions, with the
// generation they describe. netplug-flows' own pods are the aggregator's to report.
import { FLOWS } from '../render/flows.ts';
import { CONTROLLERS, NODE, type NodeLayout } from '../render/objects.ts';
import { apiStatus, describeError } from '../runtime/errors.ts';
import type { Log } from '../runtime/log.ts';
import { NETPLUG_VERSION } from '../version.ts';
import type { OperatorCaches } from './caches.ts';
import { canonicalCidr } from './canonical-cidr.ts';
import { cleanUp } from './clean-up.ts';
import {
  combine,
  type ComponentState,
  conditionsOf,
  daemonSetState,
  deploymentState,
  failingPods,
  newest,
  poolsState,
  type Problem,
} from './compute-conditions.ts';
import { defaultsPatch } from './defaults-patch.ts';
import { desiredPools } from './desired-pools.ts';
import { FLOWS_RESOURCE, nodeFlowLogs } from './flow-resources.ts';
import { fillDefaults } from './fill-defaults.ts';
import {
  FINALIZER,
  INSTALLATION,
  type Installation,
  type InstallationSpec,
  InvalidConfiguration,
  SYSTEM_NAMESPACE,
} from './installation.ts';
import { normaliseAliases } from './normalise-aliases.ts';
import { type Applied, applyAll, mergePatch, type OperatorKube } from './open-kube.ts';
import { readPlatformCidrs } from './read-platform-cidrs.ts';
import { poolObjects, reconcilePools } from './reconcile-pools.ts';
import { applyOrder, renderSystem } from './render-system.ts';
import { validateInstallation } from './validate-installation.ts';
import { INSTALLATION_PLURAL, writeComponentStatus, writeInstallationStatus } from './write-status.ts';

/** How soon to look again at what no watched object announces. */
export interface Waits {
  /** While a pool drains (its addresses are IPAM state, not watched) or a write failed. */
  notAvailableMs: number;
  /** While the clean-up waits for pods to stop (also announced by the pod cache). */
  cleanUpMs: number;
  /** After the Installation changed under a write (409), for the cache to catch up. */
  conflictMs: number;
}

export const DEFAULT_WAITS: Waits = { notAvailableMs: 10_000, cleanUpMs: 2_000, conflictMs: 1_000 };

export interface Operator {
  kube: OperatorKube;
  caches: OperatorCaches;
  /** The image netplug-system's containers run (NETPLUG_IMAGE). */
  image: string;
  /** Where netplug's files live on the nodes (NETPLUG_NODE_STATE_DIR, NETPLUG_CNI_LOG_FILE). */
  node: NodeLayout;
  log: Log;
  waits: Waits;
  /** The last clean-up wait logged. */
  said?: string | undefined;
  /** The last problem logged per part (the Installation, pools, netplug-system's objects): each is logged once until it changes. */
  warned?: Map<string, string>;
}

/** Logs `problem` unless it is what was last logged about `part`; undefined: the part is well again. */
function warnOnce(op: Operator, part: string, problem: Problem | undefined): void {
  op.warned ??= new Map();
  if (op.warned.get(part) === problem?.message) return;
  if (problem) op.log.warning(problem.message);
  if (problem) op.warned.set(part, problem.message);
  else op.warned.delete(part);
}

const NOTHING: ComponentState = { available: false, progressing: false, reason: 'NotReconciled', message: '' };

/** An Installation not named default: Degraded, saying that only "default" is reconciled. */
export async function refuseOther(op: Operator, other: Installation): Promise<void> {
  const problem: Problem = {
    reason: 'NotReconciled',
    message: `only the Installation named "${INSTALLATION}" is reconciled; this one is ignored`,
  };
  const generation = other.metadata.generation;
  await writeInstallationStatus(op.kube, other, {
    ...other.status,
    observedGeneration: generation,
    conditions: conditionsOf(NOTHING, problem, other.status?.conditions, new Date(), generation),
  });
}

/** Reconciles Installation "default"; resolves to how soon to look again (ms), or undefined when an event will say. */
export async function reconcileInstallation(op: Operator, installation: Installation): Promise<number | undefined> {
  const { kube, caches, log, waits } = op;
  const generation = installation.metadata.generation;
  if (installation.metadata.deletionTimestamp) {
    if (!installation.metadata.finalizers?.includes(FINALIZER)) return undefined;
    let waiting: string | undefined;
    try {
      waiting = await cleanUp(kube, caches.pods, installation, op.image, log);
    } catch (err) {
      // The Installation changed meanwhile (its finalizers are written guarded), or is gone: look again from the cache.
      if (apiStatus(err) === 409) return waits.conflictMs;
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
    // Said once per change, not every few seconds while pods stop.
    if (waiting && waiting !== op.said) log.info(waiting);
    op.said = waiting;
    return waiting ? waits.cleanUpMs : undefined;
  }

  // 1. The spec as the operator uses it; a spec it cannot use stops here.
  const spec = installation.spec ?? {};
  const cachedPools = caches.pools.list();
  let filled: InstallationSpec;
  let normalised: InstallationSpec;
  let desired: ReturnType<typeof desiredPools>;
  try {
    normalised = normaliseAliases(spec);
    const platformCidrs = readPlatformCidrs(caches.kubeadm);
    const pools = poolObjects(cachedPools);
    filled = fillDefaults(normalised, {
      platformCidrs,
      poolsExist: pools.length > 0,
      poolNames: new Map(pools.map((pool) => [canonicalCidr(pool.spec.spec.cidr), pool.metadata.name])),
    });
    const problems = validateInstallation(filled, platformCidrs);
    if (problems.length > 0) throw new InvalidConfiguration(problems.join('; '));
    desired = desiredPools(filled, new Date());
  } catch (err) {
    if (!(err instanceof InvalidConfiguration)) throw err;
    await degrade(op, installation, { reason: 'InvalidConfiguration', message: `the Installation cannot be used: ${err.message}` });
    return undefined;
  }

  warnOnce(op, 'installation', undefined);

  // 2. Defaults and the finalizer written back, guarded by resourceVersion (a concurrent edit
  // wins). The write changes the object: its event brings the next reconcile, from the cache.
  const patch = defaultsPatch(normalised, filled);
  const finalizers = installation.metadata.finalizers ?? [];
  if (patch || !finalizers.includes(FINALIZER)) {
    try {
      await mergePatch(kube, INSTALLATION_PLURAL, INSTALLATION, {
        metadata: { resourceVersion: installation.metadata.resourceVersion, finalizers: [...new Set([...finalizers, FINALIZER])] },
        ...(patch ? { spec: patch } : {}),
      });
      log.info(`Installation "${INSTALLATION}": ${patch ? `defaults written back (${Object.keys(patch).join(', ')})` : 'finalizer added'}`);
    } catch (err) {
      if (apiStatus(err) === 409) return waits.conflictMs;
      throw err;
    }
    return undefined;
  }

  // 3. Pools, then 4. netplug-system's objects.
  let poolProblem: Problem | undefined;
  let draining: string[] = [];
  let writeFailed = false;
  try {
    const pools = await reconcilePools(kube, cachedPools, desired);
    for (const line of pools.done) log.info(line);
    poolProblem = pools.problem;
    draining = pools.draining;
  } catch (err) {
    poolProblem = { reason: 'ResourceUpdateError', message: `IP pools: ${describeError(err)}` };
    writeFailed = true;
  }
  warnOnce(op, 'pools', poolProblem);
  const pools = poolsState(draining);
  await writeComponentStatus(kube, 'ippools', caches.statuses.get('ippools'), { state: pools, problem: poolProblem, generation });

  let netplugProblem: Problem | undefined;
  let applied: Applied = new Map();
  try {
    const flowLogs = nodeFlowLogs(caches.flowLogAggregators.get(FLOWS_RESOURCE), Boolean(caches.deployments.get(FLOWS, SYSTEM_NAMESPACE)));
    const system = renderSystem(filled, op.image, op.node, { flowLogs });
    applied = await applyAll(kube, applyOrder(system));
  } catch (err) {
    netplugProblem = { reason: 'ResourceUpdateError', message: `applying netplug-system's objects: ${describeError(err)}` };
    writeFailed = true;
  }
  warnOnce(op, 'objects', netplugProblem);

  // 5. Conditions from the workloads, as the caches or this pass's applies hold them (the newer).
  const workloads = combine([
    daemonSetState(NODE, newest(caches.daemonSets.get(NODE, SYSTEM_NAMESPACE), applied.get(`DaemonSet/${NODE}`))),
    deploymentState(CONTROLLERS, newest(caches.deployments.get(CONTROLLERS, SYSTEM_NAMESPACE), applied.get(`Deployment/${CONTROLLERS}`))),
  ]);
  netplugProblem ??= failingPods(caches.pods.list().filter((pod) => pod.metadata?.labels?.['k8s-app'] !== FLOWS));
  await writeComponentStatus(kube, 'netplug', caches.statuses.get('netplug'), { state: workloads, problem: netplugProblem, generation });
  const overall = combine([workloads, pools]);
  const problem = netplugProblem ?? poolProblem;
  const available = overall.available && !problem;
  await writeInstallationStatus(kube, installation, {
    observedGeneration: generation,
    conditions: conditionsOf(overall, problem, installation.status?.conditions, new Date(), generation),
    ...(available
      ? { netplugVersion: NETPLUG_VERSION }
      : installation.status?.netplugVersion
        ? { netplugVersion: installation.status.netplugVersion }
        : {}),
    mtu: filled.calicoNetwork?.mtu ?? 0,
    computed: filled,
  });
  // The workloads' and pods' changes are events; a pool's addresses and a failed write are not.
  return draining.length > 0 || writeFailed ? waits.notAvailableMs : undefined;
}

/** A bad Installation: reported on it and on both components; nothing that runs is changed. */
async function degrade(op: Operator, installation: Installation, problem: Problem): Promise<void> {
  const { kube, caches } = op;
  const generation = installation.metadata.generation;
  warnOnce(op, 'installation', problem);
  for (const name of ['netplug', 'ippools'])
    await writeComponentStatus(kube, name, caches.statuses.get(name), { state: NOTHING, problem, generation });
  await writeInstallationStatus(kube, installation, {
    ...installation.status,
    observedGeneration: generation,
    conditions: conditionsOf(NOTHING, problem, installation.status?.conditions, new Date(), generation),
  });
}
