// Conditions in the shape of the reference's status manager, each with a reason a program can
// match and a message a user can act on:
// - Available: every pod of the component is available and ready, on the generation its
//   controller last saw, and nothing is Degraded (reason AllObjectsAvailable; else why not);
// - Progressing: a rollout, a pool draining, or pods on their way (reason: which);
// - Degraded: the operator cannot make what it should, and waiting will not help (reason: the
//   problem, e.g. InvalidConfiguration naming the Installation's field and value).
// Each condition carries the Installation generation it was computed from (observedGeneration)
// and keeps its transition time while its status stays.
import type * as k8s from '@kubernetes/client-node';

import type { Condition } from './installation.ts';

/** Why a component is not (yet) available, or AllObjectsAvailable. */
type StateReason =
  | 'AllObjectsAvailable'
  | 'NotYetCreated'
  | 'RolloutPending'
  | 'RollingOut'
  | 'PodsUnavailable'
  | 'PodsNotReady'
  | 'IPPoolDraining'
  | 'NotReconciled';

/** Why the operator cannot make what it should: the Degraded condition's reason. */
type ProblemReason =
  | 'InvalidConfiguration'
  | 'IPPoolConflict'
  | 'ResourceUpdateError'
  | 'PodFailure'
  | 'NotReconciled'
  /** FlowLogAggregator or FlowViewer without Installation "default" (or with one being deleted). */
  | 'NoInstallation'
  /** FlowViewer without FlowLogAggregator "default": nothing to show. */
  | 'NoAggregator';

export interface ComponentState {
  available: boolean;
  progressing: boolean;
  /** Why the component is not available, or what progresses; AllObjectsAvailable (the default) when all is well. */
  reason?: StateReason;
  /** Why the component is not available, or what is rolling; "" when all is well. */
  message: string;
}

const ready: ComponentState = { available: true, progressing: false, reason: 'AllObjectsAvailable', message: '' };
const notYet = (reason: StateReason, message: string): ComponentState => ({ available: false, progressing: true, reason, message });

/**
 * The newer of a workload as the cache holds it and as an apply just answered. An apply that
 * changes a template answers with the next generation before the cache's watch delivers it; a
 * state computed from the cache alone would call the last rollout Available for that moment.
 */
export function newest<T extends k8s.KubernetesObject>(cached: T | undefined, applied: k8s.KubernetesObject | undefined): T | undefined {
  if (!applied) return cached;
  if (!cached || (applied.metadata?.generation ?? 0) > (cached.metadata?.generation ?? 0)) return applied as T;
  return cached;
}

export function daemonSetState(name: string, ds: k8s.V1DaemonSet | undefined): ComponentState {
  if (!ds) return notYet('NotYetCreated', `DaemonSet ${name} does not exist yet`);
  const s = ds.status;
  const current = (ds.metadata?.generation ?? 0) <= (s?.observedGeneration ?? -1);
  const desired = s?.desiredNumberScheduled ?? 0;
  const unavailable = s?.numberUnavailable ?? 0;
  const updated = s?.updatedNumberScheduled ?? 0;
  if (!current)
    return notYet('RolloutPending', `DaemonSet ${name} has not been rolled out yet (its controller has not seen the current generation)`);
  if (updated < desired) return notYet('RollingOut', `DaemonSet ${name} is rolling out: ${updated} of ${desired} pods updated`);
  if (unavailable > 0) return notYet('PodsUnavailable', `DaemonSet ${name}: ${unavailable} of ${desired} pods unavailable`);
  const ok = desired === (s?.numberAvailable ?? 0) && desired === (s?.numberReady ?? 0);
  return ok ? ready : notYet('PodsNotReady', `DaemonSet ${name}: ${s?.numberReady ?? 0} of ${desired} pods ready`);
}

export function deploymentState(name: string, d: k8s.V1Deployment | undefined): ComponentState {
  if (!d) return notYet('NotYetCreated', `Deployment ${name} does not exist yet`);
  const s = d.status;
  const current = (d.metadata?.generation ?? 0) <= (s?.observedGeneration ?? -1);
  const replicas = d.spec?.replicas ?? 1;
  if (!current)
    return notYet('RolloutPending', `Deployment ${name} has not been rolled out yet (its controller has not seen the current generation)`);
  if ((s?.updatedReplicas ?? 0) < replicas)
    return notYet('RollingOut', `Deployment ${name} is rolling out: ${s?.updatedReplicas ?? 0} of ${replicas} replicas updated`);
  if ((s?.unavailableReplicas ?? 0) > 0)
    return notYet('PodsUnavailable', `Deployment ${name}: ${s?.unavailableReplicas} of ${replicas} replicas unavailable`);
  const ok = replicas === (s?.availableReplicas ?? 0) && replicas === (s?.readyReplicas ?? 0);
  return ok ? ready : notYet('PodsNotReady', `Deployment ${name}: ${s?.readyReplicas ?? 0} of ${replicas} replicas ready`);
}

/** IP pools the Installation no longer lists, disabled and waiting for their addresses to be released. */
export function poolsState(draining: readonly string[]): ComponentState {
  return draining.length === 0 ? ready : notYet('IPPoolDraining', draining.join('; '));
}

/** Several components as one: available when all are; the reason is the first one's that is not. */
export function combine(states: ComponentState[]): ComponentState {
  const first = states.find((s) => !s.available) ?? states.find((s) => s.progressing);
  return {
    available: states.every((s) => s.available),
    progressing: states.some((s) => s.progressing),
    reason: first?.reason ?? 'AllObjectsAvailable',
    message: states
      .map((s) => s.message)
      .filter(Boolean)
      .join('; '),
  };
}

/** A reconcile problem: Degraded with this reason and message. */
export interface Problem {
  reason: ProblemReason;
  message: string;
}

/**
 * The three conditions; `previous` keeps each one's transition time while its status stays;
 * `generation` is the Installation's generation they describe.
 */
export function conditionsOf(
  state: ComponentState,
  problem: Problem | undefined,
  previous: readonly Condition[] = [],
  now = new Date(),
  generation?: number,
): Condition[] {
  const make = (type: string, on: boolean, reason: string, message: string): Condition => {
    const status = on ? 'True' : 'False';
    const before = previous.find((c) => c.type === type);
    return {
      type,
      status,
      reason,
      message,
      lastTransitionTime: before?.status === status && before.lastTransitionTime ? before.lastTransitionTime : now.toISOString(),
      ...(generation === undefined ? {} : { observedGeneration: generation }),
    };
  };
  const available = state.available && !problem;
  const stateReason = state.reason ?? 'AllObjectsAvailable';
  return [
    make(
      'Available',
      available,
      available ? 'AllObjectsAvailable' : (problem?.reason ?? stateReason),
      available ? 'all objects are available' : problem ? problem.message : state.message,
    ),
    make(
      'Progressing',
      state.progressing,
      state.progressing ? stateReason : available ? 'AllObjectsAvailable' : (problem?.reason ?? stateReason),
      state.progressing ? state.message : '',
    ),
    make('Degraded', problem !== undefined, problem?.reason ?? 'AsExpected', problem?.message ?? ''),
  ];
}

/** Whether two condition lists say the same (transition times aside). */
export const sameConditions = (a: readonly Condition[] = [], b: readonly Condition[] = []): boolean =>
  a.length === b.length &&
  a.every((c, i) => (['type', 'status', 'reason', 'message', 'observedGeneration'] as const).every((k) => c[k] === b[i]?.[k]));

/** Container states that mean a pod will not come up by waiting (the reference's "failing pods"). */
const FAILING = [
  'CrashLoopBackOff',
  'ImagePullBackOff',
  'ErrImagePull',
  'CreateContainerConfigError',
  'CreateContainerError',
  'InvalidImageName',
];

/** The pods that fail, as a Degraded problem naming each pod, container and reason; undefined when none does. */
export function failingPods(pods: readonly k8s.V1Pod[]): Problem | undefined {
  const failures: string[] = [];
  for (const pod of pods) {
    const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
    for (const status of statuses) {
      const waiting = status.state?.waiting;
      if (waiting?.reason && FAILING.includes(waiting.reason))
        failures.push(
          `pod ${pod.metadata?.namespace}/${pod.metadata?.name} container ${status.name}: ${waiting.reason}${waiting.message ? ` (${waiting.message})` : ''}`,
        );
    }
  }
  return failures.length > 0 ? { reason: 'PodFailure', message: failures.join('; ') } : undefined;
}
