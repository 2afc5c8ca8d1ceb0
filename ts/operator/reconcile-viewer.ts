// One reconcile of FlowViewer "default", as the aggregator's (reconcile-flows.ts): level-triggered,
// from the caches, idempotent.
// - FlowViewer present, Installation "default" present and not being deleted, FlowLogAggregator
//   "default" present and netplug-flows' Deployment made: netplug-flow-viewer's objects applied in
//   netplug-system (its Service before its Deployment; the aggregator's NETPLUG_FLOWS_READERS names
//   its service account). The kubelet gives its pods netplug-flows' Service address, which exists
//   by then. Conditions: Available once its Deployment is available; else why not (the rollout, a
//   failing pod, a write refused).
// - No Installation, or one being deleted: Degraded (NoInstallation) and the viewer's objects
//   removed; no FlowLogAggregator: Degraded (NoAggregator: it would have nothing to show) and
//   removed likewise.
// - No FlowViewer: the viewer's objects removed (an absence in the cache confirmed by a fresh
//   read first; once per run of the controller, and again whenever its Deployment is seen).
import { FLOW_VIEWER } from '../render/flow-viewer.ts';
import { FLOWS } from '../render/flows.ts';
import { apiStatus, describeError } from '../runtime/errors.ts';
import { combine, type ComponentState, conditionsOf, deploymentState, failingPods, newest, type Problem } from './compute-conditions.ts';
import { AGGREGATOR_PLURAL, FLOWS_RESOURCE, type FlowViewer, VIEWER_PLURAL, writeFlowsStatus } from './flow-resources.ts';
import { SYSTEM_NAMESPACE } from './installation.ts';
import { type Applied, applyAll, readOrNothing } from './open-kube.ts';
import { cluster, type FlowsMemory, installationStands, NOTHING, removeComponent, reporter } from './reconcile-flows.ts';
import type { Operator } from './reconcile-installation.ts';
import { renderViewerSystem } from './render-system.ts';

const isViewerPod = (pod: { metadata?: { labels?: Record<string, string> } }) => pod.metadata?.labels?.['k8s-app'] === FLOW_VIEWER;

const removeViewer = (op: Operator, memory: FlowsMemory, why: string) =>
  removeComponent(op, memory, FLOW_VIEWER, renderViewerSystem(op.image), why);

/** Reconciles FlowViewer "default"; resolves to how soon to look again (ms), or undefined when an event will say. */
export async function reconcileViewer(op: Operator, memory: FlowsMemory): Promise<number | undefined> {
  const { kube, caches } = op;
  const viewer = caches.flowViewers.get(FLOWS_RESOURCE);
  if (!viewer) {
    if (await readOrNothing(() => kube.custom.getClusterCustomObject(cluster(VIEWER_PLURAL, FLOWS_RESOURCE)))) return undefined;
    await removeViewer(op, memory, `FlowViewer "${FLOWS_RESOURCE}" is gone`);
    memory.warned = undefined;
    return undefined;
  }
  const report = reporter(op, 'FlowViewer', memory, (state, problem) => writeStatus(op, viewer, state, problem));

  // 1. Beside Installation "default" and FlowLogAggregator "default" only.
  if (!(await installationStands(op, FLOW_VIEWER, (why) => removeViewer(op, memory, why), report))) return undefined;
  if (!caches.flowLogAggregators.get(FLOWS_RESOURCE)) {
    if (await readOrNothing(() => kube.custom.getClusterCustomObject(cluster(AGGREGATOR_PLURAL, FLOWS_RESOURCE)))) return undefined;
    const message = `there is no FlowLogAggregator "${FLOWS_RESOURCE}": the viewer shows the flow logs it collects; create it first`;
    await removeViewer(op, memory, message);
    await report(NOTHING, { reason: 'NoAggregator', message });
    return undefined;
  }

  // 2. Once netplug-flows' Deployment is made (its Service is applied before it).
  if (!caches.deployments.get(FLOWS, SYSTEM_NAMESPACE)) {
    const message = `Deployment ${FLOWS} does not exist yet: ${FLOW_VIEWER} reads from it`;
    await report({ available: false, progressing: true, reason: 'NotYetCreated', message }, undefined);
    return undefined;
  }
  let problem: Problem | undefined;
  let applied: Applied = new Map();
  try {
    applied = await applyAll(kube, renderViewerSystem(op.image));
    memory.removed = false;
  } catch (err) {
    problem = { reason: 'ResourceUpdateError', message: `applying ${FLOW_VIEWER}'s objects: ${describeError(err)}` };
  }

  // 3. Conditions from its Deployment (as the cache or this pass's apply holds it, the newer) and pods.
  const state = combine([
    deploymentState(FLOW_VIEWER, newest(caches.deployments.get(FLOW_VIEWER, SYSTEM_NAMESPACE), applied.get(`Deployment/${FLOW_VIEWER}`))),
  ]);
  problem ??= failingPods(caches.pods.list().filter(isViewerPod));
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

async function writeStatus(op: Operator, viewer: FlowViewer, state: ComponentState, problem: Problem | undefined) {
  const generation = viewer.metadata.generation;
  await writeFlowsStatus(op.kube, VIEWER_PLURAL, viewer, {
    observedGeneration: generation,
    conditions: conditionsOf(state, problem, viewer.status?.conditions, new Date(), generation),
  });
}
