// One pass over Installation "default" (E.2): level-triggered, so every pass reads the whole
// state and makes the cluster match it; passes are idempotent (server-side apply, writes only
// when something differs). Order: aliases, defaults and validation (a bad Installation is
// reported as Degraded and nothing that runs is touched), the defaults and the finalizer written
// back, pools, netplug-system's objects, then the conditions.
import type * as k8s from '@kubernetes/client-node';

import { CONTROLLERS, NODE, type NodeLayout } from '../render/objects.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { canonicalCidr } from './canonical-cidr.ts';
import { cleanUp } from './clean-up.ts';
import {
  combine,
  type ComponentState,
  conditionsOf,
  daemonSetState,
  deploymentState,
  failingPods,
  type Problem,
} from './compute-conditions.ts';
import { defaultsPatch } from './defaults-patch.ts';
import { desiredPools } from './desired-pools.ts';
import { fillDefaults } from './fill-defaults.ts';
import {
  FINALIZER,
  GROUP,
  INSTALLATION,
  type Installation,
  type InstallationSpec,
  InvalidConfiguration,
  SYSTEM_NAMESPACE,
  VERSION,
} from './installation.ts';
import { type OperatorLog, reason, statusOf } from './log.ts';
import { normaliseAliases } from './normalise-aliases.ts';
import { apply, mergePatch, type OperatorKube, readOrNothing } from './open-kube.ts';
import { readPlatformCidrs } from './read-platform-cidrs.ts';
import { listPoolObjects, reconcilePools } from './reconcile-pools.ts';
import { applyOrder, renderSystem } from './render-system.ts';
import { validateInstallation } from './validate-installation.ts';
import { INSTALLATION_PLURAL, writeComponentStatus, writeInstallationStatus } from './write-status.ts';

export interface Operator {
  kube: OperatorKube;
  /** The image netplug-system's containers run (NETPLUG_IMAGE). */
  image: string;
  /** Where netplug's files live on the nodes (NETPLUG_NODE_STATE_DIR, NETPLUG_CNI_LOG_FILE). */
  node: NodeLayout;
  log: OperatorLog;
  /** The last clean-up wait logged. */
  said?: string | undefined;
}

/** How soon to look again while something is not yet as wanted. */
export const NOT_AVAILABLE_REQUEUE_MS = 10_000;
const CLEANUP_REQUEUE_MS = 2_000;

const NOTHING: ComponentState = { available: false, progressing: false, message: '' };

/** A pass; resolves to how soon the next should come (ms), or undefined for the periodic one. */
export async function reconcileInstallations(op: Operator): Promise<number | undefined> {
  const { items } = (await op.kube.custom.listClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: INSTALLATION_PLURAL,
  })) as { items: Installation[] };
  for (const other of items.filter((i) => i.metadata.name !== INSTALLATION)) await refuseOther(op, other);
  const installation = items.find((i) => i.metadata.name === INSTALLATION);
  return installation ? reconcileInstallation(op, installation) : undefined;
}

async function refuseOther(op: Operator, other: Installation): Promise<void> {
  const problem = { reason: 'NotReconciled', message: `only the Installation named "${INSTALLATION}" is reconciled; this one is ignored` };
  await writeInstallationStatus(op.kube, other, {
    ...other.status,
    conditions: conditionsFor(other, NOTHING, problem),
  });
}

const conditionsFor = (installation: Installation, state: ComponentState, problem: Problem | undefined) =>
  conditionsOf(state, problem, installation.status?.conditions);

export async function reconcileInstallation(op: Operator, installation: Installation): Promise<number | undefined> {
  const { kube, log } = op;
  if (installation.metadata.deletionTimestamp) {
    if (!installation.metadata.finalizers?.includes(FINALIZER)) return undefined;
    let waiting: string | undefined;
    try {
      waiting = await cleanUp(kube, installation, op.image, log);
    } catch (err) {
      // The Installation changed meanwhile (its finalizers are written guarded): again, from what the API holds.
      if (statusOf(err) === 409) return 0;
      throw err;
    }
    // Said once per change, not every few seconds while pods stop.
    if (waiting && waiting !== op.said) log.info(waiting);
    op.said = waiting;
    return waiting ? CLEANUP_REQUEUE_MS : undefined;
  }

  // 1. The spec as the operator uses it; a spec it cannot use stops here.
  const spec = installation.spec ?? {};
  let filled: InstallationSpec;
  let normalised: InstallationSpec;
  let desired: ReturnType<typeof desiredPools>;
  try {
    normalised = normaliseAliases(spec);
    const platformCidrs = await readPlatformCidrs(kube);
    const pools = await listPoolObjects(kube);
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
    return degrade(op, installation, { reason: 'InvalidConfiguration', message: `the Installation cannot be used: ${err.message}` });
  }

  // 2. Defaults and the finalizer written back, guarded by resourceVersion (a concurrent edit wins; the next pass sees it).
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
      if (statusOf(err) === 409) return 0;
      throw err;
    }
    // The write changed the object: the next pass (at once) works from what the API holds.
    return 0;
  }

  // 3. Pools, then 4. netplug-system's objects.
  let poolProblem: Problem | undefined;
  let draining: string[] = [];
  try {
    const pools = await reconcilePools(kube, desired);
    for (const line of pools.done) log.info(line);
    poolProblem = pools.problem;
    draining = pools.draining;
  } catch (err) {
    poolProblem = { reason: 'ResourceUpdateError', message: `IP pools: ${reason(err)}` };
  }
  if (poolProblem) log.warning(poolProblem.message);
  await writeComponentStatus(
    kube,
    'ippools',
    { available: !poolProblem && draining.length === 0, progressing: draining.length > 0, message: draining.join('; ') },
    poolProblem,
  );

  let netplugProblem: Problem | undefined;
  try {
    for (const object of applyOrder(renderSystem(filled, op.image, op.node))) await apply(kube, object);
  } catch (err) {
    netplugProblem = { reason: 'ResourceUpdateError', message: `applying netplug-system's objects: ${reason(err)}` };
    log.warning(netplugProblem.message);
  }

  // 5. Conditions from the workloads.
  const daemonSet = await readOrNothing(() => kube.apps.readNamespacedDaemonSet({ name: NODE, namespace: SYSTEM_NAMESPACE }));
  const deployment = await readOrNothing(() => kube.apps.readNamespacedDeployment({ name: CONTROLLERS, namespace: SYSTEM_NAMESPACE }));
  const workloads = combine([daemonSetState(NODE, daemonSet as k8s.V1DaemonSet | undefined), deploymentState(CONTROLLERS, deployment)]);
  netplugProblem ??= failingPods((await kube.core.listNamespacedPod({ namespace: SYSTEM_NAMESPACE })).items);
  await writeComponentStatus(kube, 'netplug', workloads, netplugProblem);
  const overall = combine([
    workloads,
    { available: draining.length === 0, progressing: draining.length > 0, message: draining.join('; ') },
  ]);
  const problem = netplugProblem ?? poolProblem;
  const available = overall.available && !problem;
  await writeInstallationStatus(kube, installation, {
    conditions: conditionsFor(installation, overall, problem),
    ...(available
      ? { netplugVersion: NETPLUG_VERSION }
      : installation.status?.netplugVersion
        ? { netplugVersion: installation.status.netplugVersion }
        : {}),
    mtu: filled.calicoNetwork?.mtu ?? 0,
    computed: filled,
  });
  return available ? undefined : NOT_AVAILABLE_REQUEUE_MS;
}

/** A bad Installation: reported on it and on both components; nothing that runs is changed. */
async function degrade(op: Operator, installation: Installation, problem: Problem): Promise<undefined> {
  op.log.warning(problem.message);
  await writeComponentStatus(op.kube, 'netplug', NOTHING, problem);
  await writeComponentStatus(op.kube, 'ippools', NOTHING, problem);
  await writeInstallationStatus(op.kube, installation, {
    ...installation.status,
    conditions: conditionsFor(installation, NOTHING, problem),
  });
  return undefined;
}
