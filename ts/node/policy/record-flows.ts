// Flow logs (NETPLUG_FLOW_LOGS): with them on, the rules that allow write their number into each
// new connection's mark, counted from connection tracking by the addon's flow tracker and taken at
// each interval's end, and the rules that deny log every packet they drop to NFLOG group
// FLOW_LOG_GROUP, read here. Both make the interval's records (ts/policy/flows.ts); denied flows
// are counted per policy, and the records go to the sender (send-flows.ts), which never waits on
// the packets' path. A group another listener holds, or a tracker that cannot count, gets a
// warning: policy is enforced all the same, and the records go without what is missing.
import type { Counter } from 'prom-client';

import type { Logger } from '../../log/logger.ts';
import type { FlowRecord } from '../../model/flow.ts';
import type { TakenFlows } from '../../dataplane/flow-tracking.ts';
import { FlowAggregator, FlowLookup, type FlowSource } from '../../policy/flows.ts';
import { systemClock, type Clock, type Timer } from '../../runtime/clock.ts';
import { describeError } from '../../runtime/errors.ts';
import { followNflog, type Subscribe } from './follow-nflog.ts';

/** The NFLOG group of flow logs (Log rules use 20). */
export const FLOW_LOG_GROUP = 21;

export interface FlowRecorderOptions {
  node: string;
  engine: FlowSource;
  intervalMs: number;
  log: Logger;
  /** Takes an interval's records; must not wait. */
  send(records: FlowRecord[]): void;
  /** What allowed connections did since the last call (the flow tracker's take); undefined without a tracker. */
  allowed(): Promise<TakenFlows | undefined>;
  /** Counts flows denied, by policy. */
  denied: Counter<'policy'>;
  /** Counts the times the tracker's events overran. */
  overruns: Counter;
  /** Counts the events the tracker read. */
  events: Counter;
  group?: number;
  clock?: Clock;
  subscribe?: Subscribe;
}

export interface FlowRecorder {
  /** The records of the interval so far are made and sent, then reading ends. */
  stop(): Promise<void>;
}

export function recordFlows(options: FlowRecorderOptions): FlowRecorder {
  const { log, clock = systemClock, subscribe, group = FLOW_LOG_GROUP } = options;
  const now = () => clock.now();
  const aggregator = new FlowAggregator({ node: options.node, lookup: new FlowLookup(options.engine) });
  let stopped = false;
  let trackerWarned = false;
  const following = followNflog({
    group,
    onPacket: (packet) => aggregator.packet(packet, now()),
    log,
    what: 'the packets of flow logs',
    started: `flow logs: reading NFLOG group ${group}`,
    clock,
    subscribe,
  });

  const flush = async () => {
    try {
      const taken = await options.allowed();
      if (taken) {
        aggregator.counted(taken.counts, now());
        if (taken.overruns > 0) options.overruns.inc(taken.overruns);
        if (taken.events > 0) options.events.inc(taken.events);
      }
      trackerWarned = false;
    } catch (err) {
      if (!trackerWarned) log.warning(`flow logs: cannot count the allowed flows (${describeError(err)}); only denied flows are recorded`);
      trackerWarned = true;
    }
    const records = aggregator.flush(now());
    for (const record of records) if (record.action === 'Deny') options.denied.inc({ policy: record.policy.policy }, record.flows);
    if (records.length > 0) options.send(records);
  };

  let flushing: Promise<void> = Promise.resolve();
  const tick = () => {
    flushing = flushing.then(flush, flush);
    if (!stopped) timer = clock.after(options.intervalMs, tick);
  };
  let timer: Timer | undefined = clock.after(options.intervalMs, tick);

  return {
    async stop() {
      stopped = true;
      timer?.cancel();
      await following.stop();
      await flushing;
      await flush();
    },
  };
}
