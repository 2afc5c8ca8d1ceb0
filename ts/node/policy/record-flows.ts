// Flow logs (NETPLUG_FLOW_LOGS): with them on, the compiler's deciding rules log each new flow's
// first packet (a denied flow's every packet) to NFLOG group FLOW_LOG_GROUP; this reads that
// group, makes the records of each interval (ts/policy/flows.ts) with the packets and bytes
// connection tracking counted for the connections allowed, counts denied flows per policy, and
// hands the records to the sender (send-flows.ts), which never waits on the packets' path. A group
// another listener holds, or conntrack that cannot be read, gets a warning: policy is enforced all
// the same, and records go without counts.
import type { Counter } from 'prom-client';

import type { Logger } from '../../log/logger.ts';
import type { FlowRecord } from '../../model/flow.ts';
import { FlowAggregator, FlowLookup, type FlowSource, type TrackedConnection } from '../../policy/flows.ts';
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
  /** Connection tracking as it is now. */
  connections(): Promise<TrackedConnection[]>;
  /** Counts flows denied, by policy. */
  denied: Counter<'policy'>;
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
  let conntrackWarned = false;
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
    let connections: TrackedConnection[] = [];
    try {
      connections = await options.connections();
      conntrackWarned = false;
    } catch (err) {
      if (!conntrackWarned)
        log.warning(`flow logs: cannot read connection tracking (${describeError(err)}); allowed flows go without packets and bytes`);
      conntrackWarned = true;
    }
    const records = aggregator.flush(now(), connections);
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
