// One reconcile of FlowLogAggregator "default" and of FlowViewer "default": level-triggered, from
// the caches, idempotent (server-side apply; status written only when it says something new).
// - FlowLogAggregator present, Installation "default" present and not being deleted,
//   netplug-node's DaemonSet made, the spec usable: netplug-flows' objects applied in
//   netplug-system (its Service before its Deployment). The Installation's reconcile turns
//   netplug-node's flow logs on once that Deployment exists (flow-resources.ts' nodeFlowLogs), so
//   the node pods it restarts are given the Service's address. Conditions: Available once the
//   Deployment is available and netplug-node's template sends to it; else why not (the
//   Deployment's rollout, the DaemonSet not yet changed, a failing pod, a write refused, a field
//   netplug-flows cannot use: nothing that runs changes then).
// - No Installation "default", or one being deleted: Degraded (NoInstallation), and netplug-flows'
//   objects removed (the Installation's clean-up removes the Deployment first, with
//   netplug-system's other pods).
// - No FlowLogAggregator: netplug-flows' objects removed, the Installation's reconcile having
//   turned netplug-node's flow logs off. An absence in the cache is confirmed by a fresh read
//   first; the removal runs once per run of the controller, and again whenever the Deployment is
//   seen, so that what a restart of the operator missed is removed too. Only objects labelled as
//   the operator's are removed (a ClusterRole netplug-flows of a manifest install stays).
// FlowViewer "default" is reconciled in reconcile-viewer.ts.
import { FLOWS } from '../render/flows.ts';
import { type KubeObject, NODE } from '../render/objects.ts';
import { apiStatus, describeError } from '../runtime/errors.ts';
import type { OperatorCaches } from './caches.ts';
import { combine, type ComponentState, conditionsOf, deploymentState, failingPods, newest, type Problem } from './compute-conditions.ts';
import {
  AGGREGATOR_PLURAL,
  aggregatorProblems,
  DEFAULT_FLUSH_INTERVAL,
  FLOWS_RESOURCE,
  type FlowLogAggregator,
  writeFlowsStatus,
} from './flow-resources.ts';
import { GROUP, INSTALLATION, MANAGED_BY, SYSTEM_NAMESPACE, VERSION } from './installation.ts';
import { type Applied, applyAll, type OperatorKube, readOrNothing, remove } from './open-kube.ts';
import type { Operator } from './reconcile-installation.ts';
import { renderFlowsSystem } from './render-system.ts';
import { INSTALLATION_PLURAL } from './write-status.ts';

/** What the aggregator's reconciles remember between runs. */
export interface FlowsMemory {
  /** netplug-flows' objects were removed since the controller started, and not applied since. */
  removed: boolean;
  /** The last problem logged. */
  warned?: string | undefined;
}

const isFlowsPod = (pod: { metadata?: { labels?: Record<string, string> } }) => pod.metadata?.labels?.['k8s-app'] === FLOWS;

/** Whether netplug-node's template (as cached) sends flow records every `intervalSeconds`. */
function nodesSending(caches: OperatorCaches, intervalSeconds: number): ComponentState {
  const ds = caches.daemonSets.get(NODE, SYSTEM_NAMESPACE);
  const agent = ds?.spec?.template.spec?.containers.find((container) => container.name === NODE);
  const env = new Map((agent?.env ?? []).map((variable) => [variable.name, variable.value]));
  if (env.get('NETPLUG_FLOW_LOGS') === 'true' && env.get('NETPLUG_FLOW_LOGS_INTERVAL') === String(intervalSeconds))
    return { available: true, progressing: false, reason: 'AllObjectsAvailable', message: '' };
  return {
    available: false,
    progressing: true,
    reason: 'RolloutPending',
    message: `DaemonSet ${NODE} does not send flow logs to ${FLOWS} every ${intervalSeconds} s yet`,
  };
}

export const NOTHING: ComponentState = { available: false, progressing: false, reason: 'NotReconciled', message: '' };

/** Removes `object` if it is there and labelled as the operator's; whether it did. */
async function removeOurs(kube: OperatorKube, object: KubeObject): Promise<boolean> {
  const live = await readOrNothing(() => kube.objects.read(object as Parameters<typeof kube.objects.read>[0]));
  const labels = live?.metadata?.labels ?? {};
  if (!live || !Object.entries(MANAGED_BY).every(([key, value]) => labels[key] === value)) return false;
  return remove(kube, object);
}

/**
 * Removes a component's objects (`objects`, its Deployment `deployment` last of them) once per run,
 * or whenever its Deployment is seen again.
 */
export async function removeComponent(
  op: Operator,
  memory: FlowsMemory,
  deployment: string,
  objects: KubeObject[],
  why: string,
): Promise<void> {
  if (memory.removed && !op.caches.deployments.get(deployment, SYSTEM_NAMESPACE)) return;
  const removed: string[] = [];
  // The Deployment first: its pods stop while the rest goes.
  for (const object of [...objects].reverse())
    if (await removeOurs(op.kube, object))
      removed.push(`${object.kind} ${object.metadata.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata.name}`);
  if (removed.length > 0) op.log.info(`${why}: deleted ${removed.join(', ')}`);
  memory.removed = true;
}

const removeFlows = (op: Operator, memory: FlowsMemory, why: string) =>
  removeComponent(op, memory, FLOWS, renderFlowsSystem({}, op.image), why);

export const cluster = (plural: string, name: string) => ({ group: GROUP, version: VERSION, plural, name });

/** Writes a resource's status: its component's state, and what is wrong if anything. */
export type Report = (state: ComponentState, problem: Problem | undefined) => Promise<void>;

/** `write`, with a problem logged once, when it first differs from the last one logged. */
export function reporter(op: Operator, kind: string, memory: FlowsMemory, write: Report): Report {
  return async (state, problem) => {
    if (problem?.message !== memory.warned && problem) op.log.warning(`${kind} "${FLOWS_RESOURCE}": ${problem.message}`);
    memory.warned = problem?.message;
    await write(state, problem);
  };
}

/**
 * Whether Installation "default" stands (present and not being deleted), which `component` runs
 * beside. When it does not: the component's objects removed and NoInstallation reported; unless the
 * cache is only behind (a fresh read finds it, and its event brings the key back).
 */
export async function installationStands(
  op: Operator,
  component: string,
  removeComponent: (why: string) => Promise<void>,
  report: Report,
): Promise<boolean> {
  const installation = op.caches.installations.get(INSTALLATION);
  const deleting = Boolean(installation?.metadata.deletionTimestamp);
  if (installation && !deleting) return true;
  if (!installation && (await readOrNothing(() => op.kube.custom.getClusterCustomObject(cluster(INSTALLATION_PLURAL, INSTALLATION)))))
    return false;
  const message = deleting
    ? `Installation "${INSTALLATION}" is being deleted: ${component} is removed with netplug`
    : `there is no Installation "${INSTALLATION}": ${component} runs beside netplug installed by the operator`;
  await removeComponent(message);
  await report(NOTHING, { reason: 'NoInstallation', message });
  return false;
}

/** Reconciles FlowLogAggregator "default"; resolves to how soon to look again (ms), or undefined when an event will say. */
export async function reconcileAggregator(op: Operator, memory: FlowsMemory): Promise<number | undefined> {
  const { kube, caches } = op;
  const aggregator = caches.flowLogAggregators.get(FLOWS_RESOURCE);
  if (!aggregator) {
    // Gone, or the cache behind: a fresh read says which (its event brings the key back).
    if (await readOrNothing(() => kube.custom.getClusterCustomObject(cluster(AGGREGATOR_PLURAL, FLOWS_RESOURCE)))) return undefined;
    await removeFlows(op, memory, `FlowLogAggregator "${FLOWS_RESOURCE}" is gone`);
    memory.warned = undefined;
    return undefined;
  }
  const report = reporter(op, 'FlowLogAggregator', memory, (state, problem) => writeStatus(kube, aggregator, state, problem));

  // 1. Beside Installation "default" only.
  if (!(await installationStands(op, FLOWS, (why) => removeFlows(op, memory, why), report))) return undefined;

  // 2. A spec netplug-flows can use; else nothing that runs changes.
  const spec = aggregator.spec ?? {};
  const problems = aggregatorProblems(spec);
  if (problems.length > 0) {
    await report(NOTHING, {
      reason: 'InvalidConfiguration',
      message: `the FlowLogAggregator cannot be used: ${problems.join('; ')}`,
    });
    return undefined;
  }

  // 3. Once netplug-node's DaemonSet is made (netplug-system exists, pods have a network).
  const intervalSeconds = spec.flushInterval ?? DEFAULT_FLUSH_INTERVAL;
  if (!caches.daemonSets.get(NODE, SYSTEM_NAMESPACE)) {
    const message = `DaemonSet ${NODE} does not exist yet: ${FLOWS} is installed beside it`;
    await report({ available: false, progressing: true, reason: 'NotYetCreated', message }, undefined);
    return undefined;
  }
  let problem: Problem | undefined;
  let applied: Applied = new Map();
  try {
    applied = await applyAll(kube, renderFlowsSystem(spec, op.image));
    memory.removed = false;
  } catch (err) {
    problem = { reason: 'ResourceUpdateError', message: `applying ${FLOWS}' objects: ${describeError(err)}` };
  }

  // 4. Conditions from the Deployment (as the cache or this pass's apply holds it, the newer) and netplug-node's template.
  const state = combine([
    deploymentState(FLOWS, newest(caches.deployments.get(FLOWS, SYSTEM_NAMESPACE), applied.get(`Deployment/${FLOWS}`))),
    nodesSending(caches, intervalSeconds),
  ]);
  problem ??= failingPods(caches.pods.list().filter(isFlowsPod));
  try {
    await report(state, problem);
  } catch (err) {
    // Changed meanwhile: its event brings the key back.
    if (apiStatus(err) === 404) return undefined;
    throw err;
  }
  // A failed write is announced by no event.
  return problem?.reason === 'ResourceUpdateError' ? op.waits.notAvailableMs : undefined;
}

async function writeStatus(kube: OperatorKube, aggregator: FlowLogAggregator, state: ComponentState, problem: Problem | undefined) {
  const generation = aggregator.metadata.generation;
  await writeFlowsStatus(kube, AGGREGATOR_PLURAL, aggregator, {
    observedGeneration: generation,
    conditions: conditionsOf(state, problem, aggregator.status?.conditions, new Date(), generation),
  });
}
