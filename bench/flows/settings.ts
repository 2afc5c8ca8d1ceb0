// The sizes and names of bench/flows.ts's run: how many rounds each part takes and how long each
// round lasts (settable from the environment, for a short run while working on the bench), the
// flow-log interval, and the two nodes with their pods.
export const THROUGHPUT_ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 12);
export const THROUGHPUT_SECONDS = Number(process.env['BENCH_SECONDS'] ?? 5);
export const CONN_ROUNDS = Number(process.env['BENCH_CONN_ROUNDS'] ?? 10);
export const CONN_SECONDS = Number(process.env['BENCH_CONN_SECONDS'] ?? 10);
/** Connections in flight at once from the client. */
export const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 4);
/** NETPLUG_FLOW_LOGS_INTERVAL (seconds): netplug-node's default unless set. */
export const INTERVAL_SECONDS = Number(process.env['BENCH_FLOW_INTERVAL'] ?? 15);
/**
 * BENCH_FLOWS_CONTROL=1: a control run, flow logs off on both nodes, so that the ratios it prints
 * are the rig's own (its two nodes, their rounds' order and spread) rather than flow logs' cost.
 * It writes nothing to bench/results.
 */
export const CONTROL = process.env['BENCH_FLOWS_CONTROL'] === '1';

export const NAMESPACE = 'bench-flows';
export const POLICY = 'server-from-client';
export const IPERF_PORT = 5201;
export const CONN_PORT = 8080;
/** The ServiceAccount whose token (audience netplug-flows) the node posts its records with. */
export const WRITER = { namespace: 'kube-system', name: 'netplug-node-bench' };

export const VARIANTS = ['on', 'off'] as const;
export type Variant = (typeof VARIANTS)[number];

/** Each variant's node (flow logs on or off) and its two pods' addresses. */
export const SIDES: Record<Variant, { node: string; server: string; client: string }> = {
  on: { node: 'flon', server: '10.79.1.10', client: '10.79.1.11' },
  off: { node: 'floff', server: '10.79.2.10', client: '10.79.2.11' },
};
