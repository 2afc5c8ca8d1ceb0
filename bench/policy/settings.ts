// The sizes and names of bench/policy.ts's run: how many samples each part takes (some set from the
// environment, for a shorter run while working on the bench), the datastore's size, and the
// addresses of the probed pods.
export const CYCLES = Number(process.env['BENCH_CYCLES'] ?? 40);
export const WARMUP = 4;
export const CREATIONS = Number(process.env['BENCH_CREATIONS'] ?? 30);
export const SET_UPDATES = Number(process.env['BENCH_SET_UPDATES'] ?? 40);
export const NAMESPACES = 100;
export const PODS = Number(process.env['BENCH_PODS'] ?? 10_000);
export const NODES = 91;
export const POLICIES = 1000;
export const RESYNC_POLICIES = Number(process.env['BENCH_RESYNC_POLICIES'] ?? 5000);
export const APPS = 10;
/** API requests in flight at once while the datastore is filled. */
export const PARALLEL = 48;
/** The target pod's listening port. */
export const PORT = 8080;
/** The node whose agent enforces policy, and the one whose agent does not. */
export const ON = 'pon';
export const OFF = 'poff';
export const TARGET = { namespace: 'probe', name: 'target', address: '10.77.0.10' };
export const CLIENT_ADDRESS = '10.77.0.20';
