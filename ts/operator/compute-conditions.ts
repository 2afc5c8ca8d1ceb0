// Per-component conditions from the workloads' status, as the reference's status manager
// computes them (§A.3): Progressing while a rollout is under way or a pod is unavailable,
// Available once the controller has seen the current generation and every pod is available and
// ready, Degraded when the operator could not make what it should (a reason says which).
import type * as k8s from '@kubernetes/client-node';

import type { Condition } from './installation.ts';

export interface ComponentState {
  available: boolean;
  progressing: boolean;
  /** Why the component is not available, or what is rolling; "" when all is well. */
  message: string;
}

export function daemonSetState(name: string, ds: k8s.V1DaemonSet | undefined): ComponentState {
  if (!ds) return { available: false, progressing: true, message: `DaemonSet ${name} does not exist yet` };
  const s = ds.status;
  const current = (ds.metadata?.generation ?? 0) <= (s?.observedGeneration ?? -1);
  const desired = s?.desiredNumberScheduled ?? 0;
  const unavailable = s?.numberUnavailable ?? 0;
  const updated = s?.updatedNumberScheduled ?? 0;
  if (!current)
    return {
      available: false,
      progressing: true,
      message: `DaemonSet ${name} has not been rolled out yet (its controller has not seen the current generation)`,
    };
  if (updated < desired)
    return { available: false, progressing: true, message: `DaemonSet ${name} is rolling out: ${updated} of ${desired} pods updated` };
  if (unavailable > 0)
    return { available: false, progressing: true, message: `DaemonSet ${name}: ${unavailable} of ${desired} pods unavailable` };
  const ok = desired === (s?.numberAvailable ?? 0) && desired === (s?.numberReady ?? 0);
  return { available: ok, progressing: !ok, message: ok ? '' : `DaemonSet ${name}: ${s?.numberReady ?? 0} of ${desired} pods ready` };
}

export function deploymentState(name: string, d: k8s.V1Deployment | undefined): ComponentState {
  if (!d) return { available: false, progressing: true, message: `Deployment ${name} does not exist yet` };
  const s = d.status;
  const current = (d.metadata?.generation ?? 0) <= (s?.observedGeneration ?? -1);
  const replicas = d.spec?.replicas ?? 1;
  if (!current)
    return {
      available: false,
      progressing: true,
      message: `Deployment ${name} has not been rolled out yet (its controller has not seen the current generation)`,
    };
  if ((s?.updatedReplicas ?? 0) < replicas)
    return {
      available: false,
      progressing: true,
      message: `Deployment ${name} is rolling out: ${s?.updatedReplicas ?? 0} of ${replicas} replicas updated`,
    };
  if ((s?.unavailableReplicas ?? 0) > 0)
    return {
      available: false,
      progressing: true,
      message: `Deployment ${name}: ${s?.unavailableReplicas} of ${replicas} replicas unavailable`,
    };
  const ok = replicas === (s?.availableReplicas ?? 0) && replicas === (s?.readyReplicas ?? 0);
  return {
    available: ok,
    progressing: !ok,
    message: ok ? '' : `Deployment ${name}: ${s?.readyReplicas ?? 0} of ${replicas} replicas ready`,
  };
}

/** Several components as one: available when all are. */
export function combine(states: ComponentState[]): ComponentState {
  return {
    available: states.every((s) => s.available),
    progressing: states.some((s) => s.progressing),
    message: states
      .map((s) => s.message)
      .filter(Boolean)
      .join('; '),
  };
}

/** A reconcile problem: Degraded with this reason and message. */
export interface Problem {
  reason: string;
  message: string;
}

/** The three conditions; `previous` keeps each one's transition time while its status stays. */
export function conditionsOf(
  state: ComponentState,
  problem: Problem | undefined,
  previous: readonly Condition[] = [],
  now = new Date(),
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
    };
  };
  const available = state.available && !problem;
  return [
    make(
      'Available',
      available,
      available ? 'AllObjectsAvailable' : problem ? 'Degraded' : 'NotAvailable',
      available ? 'all objects are available' : problem ? problem.message : state.message,
    ),
    make(
      'Progressing',
      state.progressing,
      state.progressing ? 'ResourceNotReady' : 'AllObjectsAvailable',
      state.progressing ? state.message : '',
    ),
    make('Degraded', problem !== undefined, problem?.reason ?? 'AllObjectsAvailable', problem?.message ?? ''),
  ];
}

/** Whether two condition lists say the same (transition times aside). */
export const sameConditions = (a: readonly Condition[] = [], b: readonly Condition[] = []): boolean =>
  a.length === b.length &&
  a.every((c, i) => ['type', 'status', 'reason', 'message'].every((k) => c[k as keyof Condition] === b[i]?.[k as keyof Condition]));

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
