// npm run bench:policy, second part (the first is bench/policy-compiler.ts, the compiler in-process):
// netplug-node with NETPLUG_POLICY_ENFORCEMENT=true on a real kube-apiserver (the Kubernetes
// datastore), each "node" a network namespace reaching the API server through a relay
// (test/helpers/nodes.ts), its pods network namespaces plugged into it and Pod objects, as
// test/node/policy-enforcement.test.ts does it. Four figures, each against what the owner asked:
//   1. ADD through the agent (the shim → netplug-node, spawned natively as bench/agent.ts does) in
//      a namespace with a default-deny policy and 50 other policies, against the same ADD through
//      a second agent with enforcement off, the two rotated pod by pod in one run;
//   2. a NetworkPolicy created until its effect is seen on a real connection, with 1,000 policies and
//      10,000 Pod objects in the datastore (~110 on the agent's node): a client pod connects to a
//      target pod every millisecond (bench/policy-probe.ts, inside the client's namespace) and the
//      time runs from the create request to the start of the first attempt that connects;
//   3. one pod added to a set that every policy uses (role=db in any namespace): from its Pod
//      object's status write (its address) until a connection from that address, blocked before,
//      connects;
//   4. a full resync at 5,000 policies: the agent restarted onto an empty table; its first policy
//      pass (every input fed, the whole part written: the agent's own
//      netplug_policy_flush_duration_seconds), the wall time to ready, and its VmRSS;
//   5. the agent restarted again at that size with its table left in the kernel (a rollout).
// Everything (API server, etcd, agents, namespaces, veths, the table with its namespace) goes at
// the end, on failure and on Ctrl-C too. Writes bench/results/policy.{md,json,svg}; prints the
// headline figures last.
// The parts are in bench/policy/: the cluster and its agents, each part, the report.
import { stopNativeRuns } from './lib/run-plugin.ts';
import { measureAdds } from './policy/add.ts';
import { populate, startCluster } from './policy/cluster.ts';
import { plugTargetAndClient, policyCreations, setUpdates } from './policy/connections.ts';
import { report } from './policy/report.ts';
import { restartKept, resync, startAtSize } from './policy/resync.ts';
import { cleanup, log, prepareRun } from './policy/session.ts';
import { CREATIONS, POLICIES, RESYNC_POLICIES, SET_UPDATES } from './policy/settings.ts';

async function main(): Promise<void> {
  prepareRun();
  log('starting etcd and kube-apiserver');
  const cluster = await startCluster();

  // 1. ADD with enforcement on and off.
  log('part 1: ADD through the agent, enforcement on and off');
  const adds = await measureAdds(cluster);

  // The datastore at size: 10,000 pods (about 110 on the agent's node), 1,000 policies.
  const { podsSeconds } = await populate(cluster);
  const client = await plugTargetAndClient(cluster);

  log('the agent at 1,000 policies and 10,000 pods');
  const agent = cluster.agents.on;
  const atSize = await startAtSize(agent, client);

  // 2. A policy created until a connection it allows connects.
  log(`part 2: ${CREATIONS} policies created, each until its effect on a connection`);
  const before2 = await agent.flushes();
  const creations = await policyCreations(cluster, client);

  // 3. A pod joins the set every policy uses: from its address written until its connection is allowed.
  log(`part 3: ${SET_UPDATES} pods added to the set 1,000 policies use`);
  const before3 = await agent.flushes();
  const updates = await setUpdates(cluster, client);
  const after3 = await agent.flushes();
  const rss1000 = agent.rssMiB();

  // 4. A full resync at 5,000 policies: the agent restarted onto an empty table.
  log(`part 4: ${RESYNC_POLICIES - POLICIES} more policies, then the agent restarted`);
  const resynced = await resync(cluster, client);

  // 5. The agent restarted at that size with its table in the kernel, as a rollout restarts it.
  log('part 5: the agent restarted, its table left in the kernel');
  const restart = await restartKept(cluster, client);

  report({
    adds,
    podsSeconds,
    atSize,
    creations,
    setUpdates: updates,
    passes: { before2, before3, after3 },
    rss1000,
    resync: resynced,
    restart,
  });
}

main()
  .catch((err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exitCode = 1;
  })
  .finally(async () => {
    await stopNativeRuns();
    await cleanup();
  });
