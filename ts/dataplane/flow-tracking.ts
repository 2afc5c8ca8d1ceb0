// Allowed flows counted by the native addon from connection tracking (flow logs): the marks the
// rules that allow write (ts/policy/flow-decisions.ts), read from the events of connections that
// end and from a dump of those still open at each take. Failures are thrown as DataplaneError
// naming the operation.
import { addon } from '../native/addon.ts';
import type { TrackedFlowCount } from '../native/binding.d.ts';
import { DataplaneError } from './errors.ts';

export interface TakenFlows {
  counts: TrackedFlowCount[];
  /** Times the kernel dropped events since the last take (the socket was full). */
  overruns: number;
  /** Connections followed across intervals now. */
  followed: number;
  /** Events of ended connections read since the last take (the kernel passes only those of marked connections). */
  events: number;
}

export interface FlowTracking {
  /** What allowed connections did since the last take. */
  take(): Promise<TakenFlows>;
  stop(): Promise<void>;
}

/** Starts counting in the calling process's network namespace. */
export async function startFlowTracking(): Promise<FlowTracking> {
  const started = await addon().startFlowTracking();
  if (started.error) throw new DataplaneError(started.error);
  const tracking = started.tracking;
  if (!tracking) throw new Error('the data-plane addon returned neither a tracker nor an error from startFlowTracking');
  return {
    async take() {
      const outcome = await tracking.take();
      if (outcome.error) throw new DataplaneError(outcome.error);
      return {
        counts: outcome.counts ?? [],
        overruns: outcome.overruns ?? 0,
        followed: outcome.followed ?? 0,
        events: outcome.events ?? 0,
      };
    },
    async stop() {
      const outcome = await tracking.stop();
      if (outcome.error) throw new DataplaneError(outcome.error);
    },
  };
}
