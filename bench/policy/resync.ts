// The enforcing agent's start at size and its cost: started at POLICIES policies (its first policy
// pass, its time to ready), and part 4 of bench/policy.ts, a full resync at RESYNC_POLICIES: more
// policies created while it is stopped, netplug's table deleted, the agent started again; its first
// pass (its own netplug_policy_flush_duration_seconds), CPU time, time to ready and VmRSS.
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

import type { Agent, Flushes, Probe } from './agent.ts';
import { type Cluster, createPolicies } from './cluster.ts';
import { ms, until } from './session.ts';
import { POLICIES, RESYNC_POLICIES, TARGET } from './settings.ts';

/** The agent started onto the datastore at size: its seconds to ready and its first policy passes. */
export async function startAtSize(agent: Agent, client: Probe): Promise<{ readySeconds: number; flushes: Flushes }> {
  const started = agent.start();
  await agent.ready();
  const readySeconds = ms(started, process.hrtime.bigint()) / 1000;
  const flushes = await agent.flushes();
  // The target is policed: the client's connections are dropped.
  await client.closed(TARGET.address);
  return { readySeconds, flushes };
}

export interface Resync {
  /** The agent's first policy pass (s), NaN if never seen. */
  firstPassSeconds: number;
  /** The passes counted when the first was seen done, and the agent's CPU seconds by then. */
  firstPass: (Flushes & { cpu: number }) | undefined;
  readySeconds: number;
  rssMiB: number;
}

/** Part 4: the agent stopped, the policies up to RESYNC_POLICIES created, its table deleted, the agent started again. */
export async function resync(cluster: Cluster, client: Probe): Promise<Resync> {
  const agent = cluster.agents.on;
  await agent.stop();
  await createPolicies(cluster, POLICIES, RESYNC_POLICIES);
  // Without the table the first pass writes the whole part, as on a node's first start.
  spawnSync('ip', ['netns', 'exec', cluster.onNode.netns.name, 'nft', 'delete', 'table', 'inet', 'netplug']);
  const started = agent.start();
  let firstPass: (Flushes & { cpu: number }) | undefined;
  await until(
    'the first policy pass at 5,000 policies',
    async () => {
      if (agent.child?.exitCode !== null) throw new Error(`netplug-node exited: ${agent.logText.slice(-3000)}`);
      const flushes = await agent.flushes();
      if (flushes.count >= 1) firstPass = { ...flushes, cpu: agent.cpuSeconds() };
      return flushes.count >= 1;
    },
    300_000,
    20,
  );
  await agent.ready();
  const readySeconds = ms(started, process.hrtime.bigint()) / 1000;
  // The target is policed again: the client's connections are dropped.
  await client.closed(TARGET.address);
  // VmRSS once the agent has settled after ready.
  await sleep(3000);
  return { firstPassSeconds: firstPass?.seconds ?? Number.NaN, firstPass, readySeconds, rssMiB: agent.rssMiB() };
}
