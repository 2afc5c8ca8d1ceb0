// Whether a DaemonSet or Deployment has finished rolling out, from the facts `kubectl rollout
// status` reads: the controller has seen the latest spec (observedGeneration), every pod is of the
// new template (updated counts) and available.
import { setTimeout as sleep } from 'node:timers/promises';

import { describe, type Json, type ObjectRef, type UpgradeKube } from './kube.ts';

export interface Rollout {
  settled: boolean;
  /** `2/2 updated, 2/2 available` or what it waits for. */
  detail: string;
}

export function rolloutOf(object: Json): Rollout {
  const status = object.status ?? {};
  const seen = (status.observedGeneration ?? 0) >= (object.metadata?.generation ?? 0);
  if (object.kind === 'DaemonSet') {
    const desired = status.desiredNumberScheduled ?? 0;
    const updated = status.updatedNumberScheduled ?? 0;
    const available = status.numberAvailable ?? 0;
    const detail = `${updated}/${desired} updated, ${available}/${desired} available${seen ? '' : ', new spec not yet seen by the controller'}`;
    return { settled: seen && updated === desired && available === desired && (status.numberUnavailable ?? 0) === 0, detail };
  }
  const wanted = object.spec?.replicas ?? 1;
  const updated = status.updatedReplicas ?? 0;
  const available = status.availableReplicas ?? 0;
  const total = status.replicas ?? 0;
  const detail = `${updated}/${wanted} updated, ${available}/${wanted} available${total > wanted ? `, ${total - wanted} old pods` : ''}${seen ? '' : ', new spec not yet seen by the controller'}`;
  return { settled: seen && updated === wanted && available === wanted && total === wanted, detail };
}

/** Waits until `check` returns a value (not undefined); the last state in the error when the time is up. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<{ done: T } | { waiting: string }>,
  timeoutMs: number,
  signal: AbortSignal,
  progress?: (line: string) => void,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    signal.throwIfAborted();
    const state = await check().catch((err: Error) => ({ waiting: err.message }));
    if ('done' in state) return state.done;
    if (state.waiting !== last) progress?.(`  waiting for ${what}: ${state.waiting}\n`);
    last = state.waiting;
    if (Date.now() > deadline) throw new Error(`gave up after ${Math.round(timeoutMs / 1000)} s waiting for ${what}: ${last}`);
    await sleep(2000, undefined, { signal });
  }
}

/** Waits until the workload's rollout has settled. */
export function waitRollout(kube: UpgradeKube, ref: ObjectRef, timeoutMs: number, signal: AbortSignal, progress?: (line: string) => void) {
  return waitFor(
    `the rollout of ${describe(ref)}`,
    async () => {
      const object = await kube.getOrNothing(ref);
      if (!object) return { waiting: 'it does not exist' };
      const rollout = rolloutOf(object);
      return rollout.settled ? { done: rollout.detail } : { waiting: rollout.detail };
    },
    timeoutMs,
    signal,
    progress,
  );
}
