// bench/policy.ts's report: its series and figures against the owner's targets, the notes on how
// each was taken, bench/results/policy.{md,json,svg}, and the headline figures printed last.
import { PARTS } from '../lib/agent-breakdown.ts';
import { medianOf, writeReport, type Series } from '../lib/report.ts';
import { summarize } from '../lib/stats.ts';
import type { AddResults } from './add.ts';
import type { Flushes } from './agent.ts';
import type { SetUpdates } from './connections.ts';
import type { Resync } from './resync.ts';
import { CREATIONS, CYCLES, NAMESPACES, NODES, PARALLEL, PODS, POLICIES, RESYNC_POLICIES, SET_UPDATES, WARMUP } from './settings.ts';

export interface PolicyResults {
  adds: AddResults;
  podsSeconds: number;
  /** The agent started at POLICIES policies. */
  atSize: { readySeconds: number; flushes: Flushes };
  creations: number[];
  setUpdates: SetUpdates;
  /** The agent's policy passes read before part 2, before part 3 and after part 3. */
  passes: { before2: Flushes; before3: Flushes; after3: Flushes };
  /** The agent's VmRSS at POLICIES policies, after part 3. */
  rss1000: number;
  resync: Resync;
  /** Part 5: the agent restarted with its table in the kernel; how its first write went. */
  restart: Resync & { firstWrite: string };
}

const meanPassMs = (from: Flushes, to: Flushes) => (1000 * (to.seconds - from.seconds)) / (to.count - from.count);

/** Writes bench/results/policy.{md,json,svg} and prints the table and the headline figures. */
export function report(results: PolicyResults): void {
  const { adds, creations, passes, resync, restart } = results;
  const setUpdates = results.setUpdates.samples;
  const setGroup = `a pod added to the set ${POLICIES} policies use: where the time goes`;
  const series: Series[] = [
    { group: 'ADD through the agent (51 policies in the namespace)', label: 'enforcement on', samplesMs: adds.samples.on },
    { group: 'ADD through the agent (51 policies in the namespace)', label: 'enforcement off', samplesMs: adds.samples.off },
    {
      group: `a policy created → seen on a connection (${POLICIES} policies, ${PODS} pods)`,
      label: 'enforcement on',
      samplesMs: creations,
    },
    { group: `a pod added to the set ${POLICIES} policies use → its connection allowed`, label: 'enforcement on', samplesMs: setUpdates },
    { group: setGroup, label: "API server: the write → the bench's own watch gets it", samplesMs: results.setUpdates.apiServer },
    { group: setGroup, label: "netplug: the bench's watch got it → the connection allowed", samplesMs: results.setUpdates.agentSide },
    { group: setGroup, label: "of which the agent's policy passes", samplesMs: results.setUpdates.passes },
    ...(['on', 'off'] as const).flatMap((variant) =>
      PARTS.map((part) => ({
        group: `ADD, enforcement ${variant}: where the time goes`,
        label: part,
        samplesMs: adds.parts[variant][part],
      })),
    ),
  ];
  const group0 = series[0]?.group ?? '';
  const addRatio = medianOf(series, group0, 'enforcement on') / medianOf(series, group0, 'enforcement off');
  const enforceP99 = summarize(creations).p99Ms;
  const setP99 = summarize(setUpdates).p99Ms;
  const agentSetP99 = summarize(results.setUpdates.agentSide).p99Ms;
  const ratios = [
    { label: 'ADD, enforcement on / off, median (target ≤ 1.15)', value: addRatio },
    { label: 'ADD, enforcement on, p99 (ms)', value: summarize(adds.samples.on).p99Ms },
    { label: 'ADD, enforcement off, p99 (ms)', value: summarize(adds.samples.off).p99Ms },
    { label: 'policy created → effect, p50 (ms)', value: summarize(creations).medianMs },
    { label: 'policy created → effect, p99 (ms; target ≤ 200)', value: enforceP99 },
    { label: 'pod added to a shared set → allowed, p50 (ms)', value: summarize(setUpdates).medianMs },
    { label: 'pod added to a shared set → allowed, p99 (ms; target ≤ 20)', value: setP99 },
    {
      label: "  of which the API server's (the write → a watch of the bench's gets it), p50 (ms)",
      value: summarize(results.setUpdates.apiServer).medianMs,
    },
    { label: "  of which the API server's, p99 (ms)", value: summarize(results.setUpdates.apiServer).p99Ms },
    { label: "  of which netplug's (that watch got it → allowed), p50 (ms)", value: summarize(results.setUpdates.agentSide).medianMs },
    { label: "  of which netplug's, p99 (ms)", value: agentSetP99 },
    {
      label: `first policy pass after a restart at ${POLICIES} policies (s; passes ${results.atSize.flushes.count})`,
      value: results.atSize.flushes.seconds,
    },
    { label: `agent start → ready at ${POLICIES} policies (s)`, value: results.atSize.readySeconds },
    {
      label: `the agent's policy passes during part 2, mean (ms; ${passes.before3.count - passes.before2.count} passes)`,
      value: meanPassMs(passes.before2, passes.before3),
    },
    {
      label: `the agent's policy passes during part 3, mean (ms; ${passes.after3.count - passes.before3.count} passes)`,
      value: meanPassMs(passes.before3, passes.after3),
    },
    { label: `agent VmRSS at ${POLICIES} policies, ${PODS} pods (MiB)`, value: results.rss1000 },
    { label: `full resync at ${RESYNC_POLICIES} policies: first policy pass (s; target ≤ 1)`, value: resync.firstPassSeconds },
    ...Object.entries(resync.steps).map(([step, value]) => ({ label: `  of which ${step} (s)`, value })),
    {
      label: `agent CPU time, start → its first policy pass done, at ${RESYNC_POLICIES} policies (s; passes ${resync.firstPass?.count})`,
      value: resync.firstPass?.cpu ?? Number.NaN,
    },
    { label: `agent start → ready at ${RESYNC_POLICIES} policies (s)`, value: resync.readySeconds },
    { label: `agent VmRSS at ${RESYNC_POLICIES} policies, ${PODS} pods (MiB; target ≤ 300)`, value: resync.rssMiB },
    {
      label: `agent restarted at ${RESYNC_POLICIES} policies, its table in the kernel: first policy pass (s; its first write: ${restart.firstWrite})`,
      value: restart.firstPassSeconds,
    },
    ...Object.entries(restart.steps).map(([step, value]) => ({ label: `  of which ${step} (s)`, value })),
    { label: `agent restarted at ${RESYNC_POLICIES} policies, its table in the kernel: start → ready (s)`, value: restart.readySeconds },
    { label: `creating ${PODS} Pod objects with their addresses, ${PARALLEL} at a time (s)`, value: results.podsSeconds },
  ];
  const table = writeReport({
    name: 'policy',
    title: 'Network policy enforced by netplug-node: ADD, policy and set changes, resync',
    series,
    ratios,
    notes: [
      "A real kube-apiserver with its etcd on loopback (the Kubernetes datastore); two nodes, each a network namespace reaching it through a relay (test/helpers/nodes.ts), each running the built dist/bin/netplug-node with NETPLUG_NETWORKING_BACKEND=none and MALLOC_ARENA_MAX=2 (as netplug's DaemonSet runs it); one with NETPLUG_POLICY_ENFORCEMENT=true, one without.",
      `ADD: ${CYCLES} ADDs per variant (after ${WARMUP} warm-up each) of a pod labelled app=web in a namespace with a default-deny ingress policy and 50 other policies (25 selecting the pod), through the shim and its node's agent, spawned natively (bench/lib/run-plugin.ts) and timed from spawn to exit; enforcement on and off alternate pod by pod. With enforcement the netconf has policy_setup_timeout_seconds and the agent's endpoint_status_dir, so the ADD answers once the pod's policy is in the kernel; without, it has neither. Each cycle creates the Pod object first and deletes it after the DEL (untimed).`,
      `The datastore at size: ${NAMESPACES} namespaces, ${PODS} Pod objects with their addresses (${Math.ceil(PODS / NODES)} on the enforcing node, none of them a real interface: local endpoints with chains; the rest on ${NODES - 1} other nodes), ${POLICIES} Kubernetes NetworkPolicies of the compiler bench's shapes, each allowing ingress from role=db pods of any namespace (one set, which every policy uses).`,
      'Connections: a target pod (a network namespace plugged into the enforcing node as the plugin plugs it, with its Pod object) takes ingress only from role=db pods; a client namespace plugged into the same node under a host interface outside the workload prefix connects to it. bench/policy-probe.ts in the client opens a new TCP connection every millisecond (each given 200 ms); a figure runs from the API request of the write (taken just before it) to the start of the first attempt that connected, on the monotonic clock both processes share (1 ms resolution). Between samples the write is undone and the bench waits (untimed) until 40 attempts in a row fail.',
      `Policy created: ${CREATIONS} times a NetworkPolicy allowing the client's address (ipBlock /32) to the target is created, then deleted.`,
      `Set update: ${SET_UPDATES} times a Pod object labelled role=db on another node is created without an address, and 200 ms later its status is written with the client's address; timed from that write. Then the pod is deleted. Each sample is split where the bench's own watch of that node's pods (client-node's Watch, straight to the API server, from the resource version before part 3) got the write: before it, the API server's part (the write stored, its watch cache fanning it out), which a watcher of any plugin waits for too; after it, netplug's (its watch's delivery through the node's relay, the agent's pass, the kernel, the prober's next attempt). The agent's passes in each sample are the growth of netplug_policy_flush_duration_seconds_sum between just before the write and just after the connection.`,
      `Resync: the agent stopped, ${RESYNC_POLICIES - POLICIES} more policies created (${RESYNC_POLICIES} in all), netplug's table deleted from the node, the agent started; the figure is the agent's own first policy pass (what netplug_policy_flush_duration_seconds observes: every input fed to the compiler, the whole part written to the kernel, the status files), read from the line its log gives it ("network policy programmed in X s"), watched every 20 ms (reading its /metrics that often rendered thousands of series 50 times a second in the agent, during the pass it timed); start → ready includes the informers' lists of ${PODS} pods and ${RESYNC_POLICIES} policies. VmRSS from /proc/<pid>/status 3 s after ready. The figure at ${POLICIES} policies is the same, at the start before parts 2 and 3 (onto an empty table).`,
      'Restart: then the agent stopped by SIGTERM and started again, nothing changed meanwhile and its table left in the kernel, as a rolling upgrade restarts it: at its stop it kept its last commit beside its CNI socket, and its first write goes by difference from it (the log line of that write is quoted); the figures as for the resync.',
      "Where an ADD's time goes: per ADD, from each agent's own timings (NETPLUG_CNI_TIMINGS_FILE) on the monotonic clock the spawner shares, as bench:agent splits it (bench/lib/agent-breakdown.ts); with enforcement, the agent's policy pass for the new pod and the wait for its status file are in the agent's own work.",
      "The agent's policy passes during parts 2 and 3: the mean of netplug_policy_flush_duration_seconds over the passes of each part (from /metrics before and after), to tell the agent's pass from the rest of a figure (the API server's watch, the controller's 50 ms settle, the prober).",
      'The agent CPU time at the resync is user + system from /proc/<pid>/stat, from its start until its first policy pass was seen done (polled every 20 ms): on a loaded machine it says more than wall time.',
      'The machine has 2 cores, shared during the run with other work (a test run, other builds): medians, ratios and p99 are noisy.',
    ],
  });
  console.log(table);
  console.log('\nwrote bench/results/policy.{md,json,svg}\n');
  console.log(`policy add ratio: ${addRatio.toFixed(2)}`);
  console.log(`policy enforce p99 ms: ${enforceP99.toFixed(1)}`);
  console.log(`policy set update p99 ms: ${setP99.toFixed(1)}`);
  console.log(`policy set update p99 ms from the API server's watch: ${agentSetP99.toFixed(1)}`);
  console.log(`policy restart 5000 seconds (its table kept): ${restart.firstPassSeconds.toFixed(2)}`);
  console.log(`policy resync 5000 seconds: ${resync.firstPassSeconds.toFixed(2)}`);
  console.log(`agent rss MiB: ${resync.rssMiB.toFixed(0)}`);
}
