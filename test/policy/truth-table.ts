// The truth table with real packets: the verdict of every real connection equals the pure model's
// (model.ts). After Kubernetes' own NetworkPolicy e2e suite: pods a, b, c in namespaces x, y, z on
// one node running netplug-node with enforcement on. Each suite file gives the cluster (a local node
// on either datastore, real-cluster.ts; or pods under the real kubelet, test/e2e) and its seeds.
// For each seeded world of the generators (generate.ts: Kubernetes NetworkPolicies alone, then
// with netplug's policies, tiers, Pass, Deny, Log and network sets, then many at once), its
// policies go in as users put them; once the agent's metrics show it has programmed what a
// compiler fed the same world programs, every (from, to, port 80/81, TCP/UDP) is probed at once
// with real packets, again until the observed matrix equals the model's (20 s at most: the agent
// may still be writing). The policies go before the next world, and the next starts only once the
// agent has programmed none.
//
// A pod's connections to itself never leave its namespace (loopback), so no policy sees them: those
// cells are expected open, as upstream's suite expects (AllowLoopback).
//
// Source ports: each probe has a fresh one (probe.ts), not the model's 40000. The generators'
// source-port rules name ports up to 443 only, so every port the probes use gives the verdict 40000
// does; each world is checked for that before it is probed.
//
// A failure names the seed (generateWorld(seed, options) gives the world again), the policies, and
// each differing cell with the model's verdict, the observed one and that of the compiled tables
// interpreted (harness.ts), which tells the compiler's mistakes from the agent's and the kernel's.
// NETPLUG_TRUTH_CASES=<n> runs n worlds in each suite; NETPLUG_TRUTH_SEED=<seed> that one only.
import type { ExecutionContext, TestFn } from 'ava';

import { dump } from 'js-yaml';

import { eventually } from '../helpers/eventually.ts';
import { sharedTeardowns, type Teardowns } from '../helpers/shared.ts';
import { PORTS, PROTOCOLS } from './cluster.ts';
import { generateWorld, type WorldOptions } from './generate.ts';
import { compiledVerdict, partsFor } from './harness.ts';
import { expectedVerdict, SOURCE_PORT, type PolicyWorld, type Probe, type Verdict } from './model.ts';
import { cellName, probeRound, SourcePorts, type Cell, type Outcome } from './probe.ts';
import { noPolicies, onCluster, type AgentCounts, type RealCluster } from './real-cluster.ts';

/** A probe not answered in this long is denied (an allowed one here answers in about a millisecond). */
const PROBE_TIMEOUT_MS = 400;
/** How long the agent may take to program a world, and the kernel to agree with the model after. */
const SETTLE_MS = 20_000;
/** Source ports the probes may use (probe.ts): the model's verdict must not depend on which. */
const PROBE_SOURCE_PORTS = [10_000, 32_768, 59_999];

export interface TruthTableSuite {
  /** The cluster, made in the file's before hook, with everything it made going with `shared`. */
  start(shared: Teardowns): Promise<RealCluster>;
  /** How many worlds (NETPLUG_TRUTH_CASES overrides). */
  cases: number;
  /**
   * Added to each kind's first seed (1 Kubernetes only, 1001 mixed, 2001 many policies, below
   * 1000 each): suites on other clusters probe other worlds of the same generators.
   */
  seedOffset: number;
}

/** Seeds by kind, as generated.test.ts numbers them: 1… Kubernetes only, 1001… mixed, 2001… many policies. */
function optionsOf(seed: number): WorldOptions {
  if (seed < 1000) return { netplugPolicies: 0 };
  if (seed < 2000) return {};
  return { kubernetesPolicies: 6, netplugPolicies: 6 };
}

function seeds(cases: number, offset: number): number[] {
  if (process.env.NETPLUG_TRUTH_SEED) return [Number(process.env.NETPLUG_TRUTH_SEED)];
  const count = Number(process.env.NETPLUG_TRUTH_CASES ?? cases);
  const many = Math.floor(count / 10);
  const kubernetes = Math.ceil((count - many) / 2);
  const mixed = count - many - kubernetes;
  const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + offset + i);
  return [...range(1, kubernetes), ...range(1001, mixed), ...range(2001, many)];
}

const describeWorld = (world: PolicyWorld) =>
  dump({ kubernetes: world.kubernetesPolicies, netplug: world.policies }, { lineWidth: 200, noRefs: true, flowLevel: 6 });

const probeOf = (cell: Cell, sourcePort = SOURCE_PORT): Probe => ({
  from: { pod: cell.from },
  to: { pod: cell.to },
  family: 4,
  protocol: cell.protocol,
  port: cell.port,
  sourcePort,
});

function cellsOf(world: PolicyWorld): Cell[] {
  const pods = world.cluster.pods;
  return pods.flatMap((from) => pods.flatMap((to) => PORTS.flatMap((port) => PROTOCOLS.map((protocol) => ({ from, to, port, protocol })))));
}

/** The model's verdict per cell (a pod to itself: open, loopback). */
function modelMatrix(world: PolicyWorld, cells: readonly Cell[]): Map<string, Verdict> {
  return new Map(cells.map((cell) => [cellName(cell), cell.from === cell.to ? 'allow' : expectedVerdict(world, probeOf(cell))]));
}

const sameCounts = (a: AgentCounts | undefined, b: AgentCounts) =>
  a !== undefined && a.policies === b.policies && a.rules === b.rules && a.endpoints === b.endpoints;

/** Registers the suite's hooks and one serial test per world. */
export function truthTableSuite(test: TestFn, suite: TruthTableSuite): void {
  const shared = sharedTeardowns(test);
  let real: RealCluster;
  const sourcePorts = new SourcePorts();

  async function agentHolds(what: string, expected: AgentCounts, timeoutMs = SETTLE_MS): Promise<void> {
    let last: AgentCounts | undefined;
    try {
      await eventually(
        `the agent to program ${what} (${JSON.stringify(expected)})`,
        async () => {
          last = await real.counts();
          return sameCounts(last, expected);
        },
        { timeoutMs, intervalMs: 50, context: () => `last counts ${JSON.stringify(last)}` },
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${await real.logTail()}`);
    }
  }

  // Serial: after the before hooks registered earlier (a cluster's) have finished.
  test.serial.before(async () => {
    real = await suite.start(shared);
    await agentHolds('the nine pods', real.expectedCounts(noPolicies(real.cluster)), 120_000);
  });

  async function truthTable(t: ExecutionContext, seed: number): Promise<void> {
    const world = onCluster(generateWorld(seed, optionsOf(seed)), real.cluster);
    const cells = cellsOf(world);
    const expected = modelMatrix(world, cells);
    for (const cell of cells)
      for (const port of PROBE_SOURCE_PORTS)
        if (cell.from !== cell.to && expectedVerdict(world, probeOf(cell, port)) !== expected.get(cellName(cell)))
          throw new Error(`seed ${seed}: ${cellName(cell)} depends on the source port (${port}): the probes cannot stand for the model's`);
    const nothing = real.expectedCounts(noPolicies(real.cluster));
    t.teardown(async () => {
      await real.remove(world);
      await agentHolds('no policy', nothing);
    });
    await real.apply(world);
    await agentHolds(`seed ${seed}`, real.expectedCounts(world));

    let observed = new Map<string, Outcome>();
    let rounds = 0;
    const differing = () => cells.filter((cell) => observed.get(cellName(cell)) !== expected.get(cellName(cell)));
    try {
      await eventually(
        `the truth table of seed ${seed}`,
        async () => {
          rounds++;
          observed = await probeRound(cells, real.processes, sourcePorts, PROBE_TIMEOUT_MS);
          const cellsDiffering = differing();
          // Shown with the test's result: a retried round says why (late probes, a slow agent).
          if (cellsDiffering.length > 0)
            t.log(
              `round ${rounds}: ${cellsDiffering.length} cells differ: ${cellsDiffering
                .slice(0, 6)
                .map((cell) => `${cellName(cell)} ${observed.get(cellName(cell))}`)
                .join('; ')}`,
            );
          return cellsDiffering.length === 0;
        },
        { timeoutMs: SETTLE_MS, intervalMs: 100 },
      );
    } catch (err) {
      const parts = partsFor(world);
      const lines = differing().map((cell) => {
        const compiled = cell.from === cell.to ? '-' : compiledVerdict(parts, probeOf(cell)).verdict;
        return `  ${cellName(cell)}: model ${expected.get(cellName(cell))}, observed ${observed.get(cellName(cell))}, compiled ${compiled}`;
      });
      t.fail(
        `seed ${seed} (generateWorld(${seed}, ${JSON.stringify(optionsOf(seed))})): ${lines.length} of ${cells.length} cells differ after ${SETTLE_MS / 1000} s (${rounds} rounds)\n${lines.join('\n')}\n${describeWorld(world)}\n${(err as Error).message}\nlogs:\n${await real.logTail()}`,
      );
      return;
    }
    const denied = [...expected.values()].filter((verdict) => verdict === 'deny').length;
    t.log(`${cells.length - denied} open, ${denied} denied; ${rounds} rounds of probes`);
    t.deepEqual(
      cells.map((cell) => `${cellName(cell)} ${observed.get(cellName(cell))}`),
      cells.map((cell) => `${cellName(cell)} ${expected.get(cellName(cell))}`),
    );
  }

  for (const seed of seeds(suite.cases, suite.seedOffset)) {
    const { kubernetesPolicies, netplugPolicies } = { kubernetesPolicies: '1–3', netplugPolicies: '1–3', ...optionsOf(seed) };
    test.serial(
      `seed ${seed} (${kubernetesPolicies} Kubernetes, ${netplugPolicies} netplug policies): real packets agree with the model`,
      (t) => truthTable(t, seed),
    );
  }
}
