// Flow logs on this node (NETPLUG_FLOW_LOGS): connection tracking counts packets and bytes (its
// sysctls, in this namespace), the addon's flow tracker counts the allowed connections and the
// flow-log group gives the denied ones, into each interval's records (record-flows.ts), and the
// records go to the aggregator (send-flows.ts).
import { enableConntrackAccounting } from '../../dataplane/conntrack.ts';
import { startFlowTracking, type FlowTracking } from '../../dataplane/flow-tracking.ts';
import type { Logger } from '../../log/logger.ts';
import type { PolicyEngine } from '../../policy/engine.ts';
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
  let tracking: FlowTracking | undefined;
  try {
    tracking = await startFlowTracking();
  } catch (err) {
    log.warning(`flow logs: cannot follow connection tracking (${describeError(err)}); only denied flows are recorded`);
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
    allowed: async () => tracking?.take(),
    denied: metrics.flowsDenied,
    overruns: metrics.flowEventsOverrun,
    events: metrics.flowEvents,
  });
  return {
    async stop() {
      await recorder.stop();
      await tracking?.stop().catch((err: unknown) => log.warning(`flow logs: stopping the flow tracker: ${describeError(err)}`));
      await sender.idle();
    },
  };
}
