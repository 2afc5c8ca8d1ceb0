// The enforcing agent's start at size and its cost: started at POLICIES policies (its first policy
// pass, its time to ready), and part 4 of bench/policy.ts, a full resync at RESYNC_POLICIES: more
// policies created while it is stopped, netplug's table deleted, the agent started again; its first
// pass (its own measure, as its log line gives it), CPU time, time to ready and VmRSS. Part 5: the
// agent stopped and started again at that size with its table left in the kernel, as a rolling
// upgrade restarts it: it takes over the table its previous run kept and writes what changed.
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

import { nftBinary } from '../../test/helpers/kernel.ts';
import type { Agent, Flushes, Probe } from './agent.ts';
import { type Cluster, createPolicies } from './cluster.ts';
import { ms, until } from './session.ts';
import { POLICIES, RESYNC_POLICIES, TARGET } from './settings.ts';

/** What the agent logs once its first policy pass is in the kernel (ts/node/policy/policy.ts). */
const FIRST_PASS = /network policy programmed in ([0-9.]+) s \(([^;]*);/;

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
  /** The first pass's steps (s), as the agent's log line gives them. */
  steps: Record<string, number>;
  readySeconds: number;
  rssMiB: number;
}

/** Part 4: the agent stopped, the policies up to RESYNC_POLICIES created, its table deleted, the agent started again. */
export async function resync(cluster: Cluster, client: Probe): Promise<Resync> {
  const agent = cluster.agents.on;
  await agent.stop();
  await createPolicies(cluster, POLICIES, RESYNC_POLICIES);
  // Without the table the first pass writes the whole part, as on a node's first start. The
  // system's nft by its path: npm's PATH finds the nft of the @vercel/nft package first.
  const deleted = spawnSync('ip', ['netns', 'exec', cluster.onNode.netns.name, nftBinary(), 'delete', 'table', 'inet', 'netplug']);
  if (deleted.status !== 0) throw new Error(`nft delete table inet netplug failed: ${deleted.stderr}`);
  return restarted(agent, client);
}

/** Part 5: the agent stopped (SIGTERM, as a rollout does) and started again, its table left in the kernel. */
export async function restartKept(cluster: Cluster, client: Probe): Promise<Resync & { firstWrite: string }> {
  const agent = cluster.agents.on;
  await agent.stop();
  const figures = await restarted(agent, client);
  const firstWrite = /nftables table inet netplug (written whole|taken over[^\n]*)/.exec(agent.logText)?.[1] ?? 'not logged';
  return { ...figures, firstWrite };
}

/** The stopped agent started again: its first policy pass (its own figure and steps), CPU, time to ready, VmRSS. */
async function restarted(agent: Agent, client: Probe): Promise<Resync> {
  const started = agent.start();
  let firstPass: (Flushes & { cpu: number }) | undefined;
  const steps: Record<string, number> = {};
  // Watched in the agent's log (the line its first pass writes, with its duration), not its
  // /metrics: rendering thousands of series 50 times a second would be the bench's own load on
  // the pass it times (Prometheus scrapes every 15 s or more).
  await until(
    `the first policy pass at ${RESYNC_POLICIES} policies`,
    async () => {
      if (agent.child?.exitCode !== null) throw new Error(`netplug-node exited: ${agent.logText.slice(-3000)}`);
      const line = FIRST_PASS.exec(agent.logText);
      if (!line) return false;
      firstPass = { count: 1, seconds: Number(line[1]), cpu: agent.cpuSeconds() };
      for (const part of (line[2] ?? '').split(', ')) {
        const [, name, value] = /^(.+) ([0-9.]+) s$/.exec(part) ?? [];
        if (name !== undefined) steps[name] = Number(value);
      }
      return true;
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
  return { firstPassSeconds: firstPass?.seconds ?? Number.NaN, firstPass, steps, readySeconds, rssMiB: agent.rssMiB() };
}
