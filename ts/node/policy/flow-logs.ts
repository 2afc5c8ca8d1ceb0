// Flow logs on this node (NETPLUG_FLOW_LOGS): connection tracking counts packets and bytes (its
// sysctls, in this namespace), the flow-log group is read into each interval's records
// (record-flows.ts), and the records go to the aggregator (send-flows.ts).
import { dumpConntrack, enableConntrackAccounting, type ConntrackEntry } from '../../dataplane/conntrack.ts';
import type { Logger } from '../../log/logger.ts';
import type { PolicyEngine } from '../../policy/engine.ts';
import type { TrackedConnection } from '../../policy/flows.ts';
import { describeError } from '../../runtime/errors.ts';
import type { NodeSettings } from '../shared/settings.ts';
import type { PolicyMetrics } from './policy-metrics.ts';
import { FLOW_LOG_GROUP, recordFlows, type FlowRecorder } from './record-flows.ts';
import { FlowSender } from './send-flows.ts';

/** Starts recording and sending; stop() sends what was recorded last. */
export async function startFlowLogs(
  node: string,
  settings: NonNullable<NodeSettings['flowLogs']>,
  engine: PolicyEngine,
  metrics: PolicyMetrics,
  log: Logger,
): Promise<FlowRecorder> {
  try {
    await enableConntrackAccounting();
  } catch (err) {
    log.warning(
      `flow logs: cannot turn on connection tracking's counters (${describeError(err)}); allowed flows go without packets and bytes`,
    );
  }
  const sender = new FlowSender({
    aggregator: settings.aggregator,
    ...(settings.tokenFile ? { tokenFile: settings.tokenFile } : {}),
    log,
    sent: metrics.flowRecordsSent,
    dropped: metrics.flowRecordsDropped,
  });
  log.info(`flow logs: recording every ${settings.intervalMs / 1000} s, sent to ${settings.aggregator} (NFLOG group ${FLOW_LOG_GROUP})`);
  const recorder = recordFlows({
    node,
    engine,
    intervalMs: settings.intervalMs,
    log,
    send: (records) => sender.send(records),
    connections: async () => (await dumpConntrack()).map(trackedConnection),
    denied: metrics.flowsDenied,
  });
  return {
    async stop() {
      await recorder.stop();
      await sender.idle();
    },
  };
}

/** A conntrack entry as flow records count it: its original tuple, the reply's source, both ways' packets and bytes. */
function trackedConnection(entry: ConntrackEntry): TrackedConnection {
  const { original, reply } = entry;
  return {
    protocol: entry.protocol,
    source: original.source,
    destination: original.destination,
    ...(original.sourcePort !== undefined ? { sourcePort: original.sourcePort } : {}),
    ...(original.destinationPort !== undefined ? { destinationPort: original.destinationPort } : {}),
    replySource: reply.source,
    ...(reply.sourcePort !== undefined ? { replySourcePort: reply.sourcePort } : {}),
    packets: original.packets + reply.packets,
    bytes: original.bytes + reply.bytes,
  };
}
