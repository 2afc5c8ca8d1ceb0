// The sizes of bench/nodes.ts's run, settable from the environment (a short run while working on
// the bench), and its progress log.
/** Rounds of the Deployment per variant, each on a fresh three-node cluster. */
export const DEPLOY_ROUNDS = Number(process.env['BENCH_NODES_ROUNDS'] ?? 2);
/** Traffic rounds per mode: each round one iperf3 run and one ping run pod to pod and node to node. */
export const TRAFFIC_ROUNDS = Number(process.env['BENCH_NODES_TRAFFIC_ROUNDS'] ?? 6);
/** iperf3's seconds per run, after one second omitted (the connection's slow start). */
export const IPERF_SECONDS = Number(process.env['BENCH_NODES_SECONDS'] ?? 5);
/** Echo requests per ping run, 20 ms apart: each reply's round trip is a sample. */
export const PINGS = Number(process.env['BENCH_NODES_PINGS'] ?? 50);
export const REPLICAS = 100;

export const log = (text: string) => console.error(`[bench:nodes ${new Date().toISOString().slice(11, 19)}] ${text}`);
