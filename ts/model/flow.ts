// Flow logs: what netplug-node records of the connections its policy decided, aggregated per
// interval, and sends to the flow-log aggregator (netplug-flows), which keeps a bounded window of
// them for `netplugctl flows` and the flow viewer. One record is one (source, destination,
// protocol, destination port, reporter, verdict, deciding policy) over one interval of one node.
import * as z from 'zod/mini';

/** One end of a flow: its address, and the pod (or host endpoint, or network set) it is, when known. */
const flowEndSchema = z.object({
  address: z.string(),
  /** Absent for ICMP and for the source port of an aggregated record (ports vary). */
  port: z.optional(z.number()),
  /** `pod`, `hep` (a host endpoint), `net` (a network set) or `external` (nothing known). */
  kind: z.enum(['pod', 'hep', 'net', 'external']),
  namespace: z.optional(z.string()),
  /** The pod's, host endpoint's or network set's name. */
  name: z.optional(z.string()),
  labels: z.optional(z.record(z.string(), z.string())),
});
export type FlowEnd = z.infer<typeof flowEndSchema>;

/** What decided a flow at one endpoint: the policy (or profile) and rule, or the default at the end of a tier. */
const flowPolicySchema = z.object({
  /** `NetworkPolicy/<ns>/<name>`, `GlobalNetworkPolicy/<name>`, `Profile/<name>`, or `default-deny` (no rule allowed). */
  policy: z.string(),
  /** The tier, for policies. */
  tier: z.optional(z.string()),
  /** The rule's index in its direction's list; absent for the end of a tier. */
  rule: z.optional(z.number()),
  action: z.enum(['Allow', 'Deny']),
});
export type FlowPolicy = z.infer<typeof flowPolicySchema>;

const flowRecordSchema = z.object({
  /** The node that recorded it. */
  node: z.string(),
  /** Start and end of the interval it covers, ms since the epoch. */
  start: z.number(),
  end: z.number(),
  source: flowEndSchema,
  destination: flowEndSchema,
  /** IP protocol number. */
  protocol: z.number(),
  /** Which end's policy this is: the source's egress (`src`) or the destination's ingress (`dst`). */
  reporter: z.enum(['src', 'dst']),
  action: z.enum(['Allow', 'Deny']),
  policy: flowPolicySchema,
  /** Connections (or, denied, connection attempts) seen in the interval. */
  flows: z.number(),
  packets: z.number(),
  bytes: z.number(),
});
export type FlowRecord = z.infer<typeof flowRecordSchema>;

/** The batch a node posts to the aggregator. */
export const flowBatchSchema = z.object({ records: z.array(flowRecordSchema) });
export type FlowBatch = z.infer<typeof flowBatchSchema>;

/** Filters of `netplugctl flows` and the aggregator's query (every one given must hold). */
export interface FlowFilter {
  /** Either end in this namespace. */
  namespace?: string;
  /** Either end this pod (`<namespace>/<name>` or a name with `namespace`). */
  pod?: string;
  /** Decided by this policy (its key, or `<ns>/<name>` or `<name>` as netplugctl shows them). */
  policy?: string;
  action?: 'Allow' | 'Deny';
  node?: string;
  /** Records ending after this time (ms since the epoch). */
  since?: number;
}
