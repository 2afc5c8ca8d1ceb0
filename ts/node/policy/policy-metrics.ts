// The policy subsystem's metrics, on the program's registry:
//   netplug_policy_policies_programmed          policies whose chains are in the table (those selecting a local pod)
//   netplug_policy_rules_programmed             their rules
//   netplug_policy_endpoints_programmed         local pods dispatched to their chains
//   netplug_policy_issues                       what of the followed policies cannot be programmed, now
//   netplug_policy_issues_total                 such problems seen (each new one counted once)
//   netplug_policy_flush_duration_seconds       a pass: feed the engine, write the table, the status files
//   netplug_policy_pod_programmed_seconds       a local pod first seen (watch or ADD) → its status file written
// and with flow logs on (record-flows.ts, send-flows.ts):
//   netplug_flows_denied_total{policy}          flows (connection attempts) denied, by the policy that denied them
//   netplug_flow_records_sent_total             flow records the aggregator took
//   netplug_flow_records_dropped_total{reason}  flow records dropped: queue-full, unreachable, refused
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** From 1 ms (an element change) to a minute (a large table written whole on a loaded node). */
const FLUSH_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export class PolicyMetrics {
  readonly policies: Gauge;
  readonly rules: Gauge;
  readonly endpoints: Gauge;
  readonly issues: Gauge;
  readonly issuesSeen: Counter;
  readonly flush: Histogram;
  readonly podProgrammed: Histogram;
  readonly flowsDenied: Counter<'policy'>;
  readonly flowRecordsSent: Counter;
  readonly flowRecordsDropped: Counter<'reason'>;
  readonly flowEventsOverrun: Counter;
  readonly flowEvents: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    this.policies = new Gauge({
      name: 'netplug_policy_policies_programmed',
      help: 'Policies whose chains are in netplug’s table (those selecting a pod of this node; profiles not counted).',
      registers,
    });
    this.rules = new Gauge({ name: 'netplug_policy_rules_programmed', help: 'Rules of the programmed policies.', registers });
    this.endpoints = new Gauge({
      name: 'netplug_policy_endpoints_programmed',
      help: 'Pods of this node dispatched to their policy chains.',
      registers,
    });
    this.issues = new Gauge({
      name: 'netplug_policy_issues',
      help: 'Problems of the followed policies and resources that keep them (or a rule of them) from being programmed, now.',
      registers,
    });
    this.issuesSeen = new Counter({
      name: 'netplug_policy_issues_total',
      help: 'Problems of the followed policies and resources that kept them (or a rule of them) from being programmed, each counted once.',
      registers,
    });
    this.flush = new Histogram({
      name: 'netplug_policy_flush_duration_seconds',
      help: 'Time a policy pass took: feeding the compiler, writing netplug’s table, the endpoint status files.',
      buckets: FLUSH_BUCKETS,
      registers,
    });
    this.podProgrammed = new Histogram({
      name: 'netplug_policy_pod_programmed_seconds',
      help: 'Time from a pod of this node first seen (by the watch or its ADD) to its endpoint status file written (its policy in the kernel).',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.flowsDenied = new Counter({
      name: 'netplug_flows_denied_total',
      help: 'Flows (connection attempts) policy denied on this node, by the policy (or default-deny) that denied them; with flow logs on.',
      labelNames: ['policy'],
      registers,
    });
    this.flowRecordsSent = new Counter({
      name: 'netplug_flow_records_sent_total',
      help: 'Flow records the flow-log aggregator took.',
      registers,
    });
    this.flowRecordsDropped = new Counter({
      name: 'netplug_flow_records_dropped_total',
      help: 'Flow records dropped, by reason: queue-full, unreachable (the aggregator), refused (by the aggregator).',
      labelNames: ['reason'],
      registers,
    });
    this.flowEventsOverrun = new Counter({
      name: 'netplug_flow_events_overruns_total',
      help: "Times the kernel dropped events of ended connections for want of room (their connections are then counted only if still tracked at the interval's end).",
      registers,
    });
    this.flowEvents = new Counter({
      name: 'netplug_flow_events_total',
      help: 'Events of ended connections the flow tracker read: only connections a flow-logging rule allowed (marked) pass the kernel filter.',
      registers,
    });
  }
}
