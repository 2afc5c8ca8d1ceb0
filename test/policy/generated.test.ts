// The compiler against the model on generated worlds: for each seed, random Kubernetes and netplug
// policies over pods a, b, c in namespaces x, y, z on two nodes, compiled per node, and every pod
// pair × port (80, 81) × protocol (TCP, UDP), plus ICMP, SCTP, IPv6 and outside addresses,
// interpreted through the compiled tables and compared with the model's verdict. explain's verdict
// for the same probes is compared too. A mismatch names the seed, the probe and the policies.
import test from 'ava';

import { dump } from 'js-yaml';

import { explain } from '../../ts/policy/explain.ts';
import { checkPolicyDocument } from '../../ts/model/policy-check.ts';
import { extraProbes, generateWorld, podProbes, Random } from './generate.ts';
import { compiledVerdict, describeProbe, partsFor, snapshotOf } from './harness.ts';
import { expectedVerdict, type PolicyWorld, type Probe } from './model.ts';
import { testCluster } from './cluster.ts';

const describeWorld = (world: PolicyWorld) =>
  dump({ kubernetes: world.kubernetesPolicies, netplug: world.policies }, { lineWidth: 200, noRefs: true, flowLevel: 6 });

function compare(world: PolicyWorld, probes: Probe[], seed: number): string[] {
  const parts = partsFor(world);
  const failures: string[] = [];
  for (const probe of probes) {
    const expected = expectedVerdict(world, probe);
    const { verdict, traces } = compiledVerdict(parts, probe);
    if (verdict !== expected)
      failures.push(
        `seed ${seed}: ${describeProbe(probe)}: model ${expected}, compiled ${verdict} (chains ${traces.map((t) => t.chains.join(' > ')).join(' | ')})`,
      );
  }
  return failures;
}

function check(t: import('ava').ExecutionContext, seeds: number[], options: Parameters<typeof generateWorld>[1]) {
  let probes = 0;
  const verdicts = { allow: 0, deny: 0 };
  for (const seed of seeds) {
    const world = generateWorld(seed, options);
    for (const policy of world.policies) checkPolicyDocument(policy); // the generators write valid documents
    const list = [...podProbes(world), ...extraProbes(world, new Random(seed * 7 + 1))];
    probes += list.length;
    for (const probe of list) verdicts[expectedVerdict(world, probe)]++;
    const failures = compare(world, list, seed);
    if (failures.length > 0) {
      t.fail(`${failures.slice(0, 8).join('\n')}\n${failures.length} mismatches; the world:\n${describeWorld(world)}`);
      return;
    }
  }
  t.log(`${seeds.length} worlds, ${probes} probes: ${verdicts.allow} allowed, ${verdicts.deny} denied`);
  // The generated worlds must exercise both outcomes, or the comparison proves little.
  t.true(verdicts.allow > probes / 10 && verdicts.deny > probes / 10, JSON.stringify(verdicts));
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

test('Kubernetes NetworkPolicies: compiled tables agree with the model on every probe', (t) => {
  check(t, range(1, 200), { netplugPolicies: 0 });
});

test('netplug policies with Kubernetes ones, tiers, Pass, Deny, Log, network sets: compiled tables agree with the model', (t) => {
  check(t, range(1001, 200), {});
});

test('many policies at once: compiled tables agree with the model', (t) => {
  check(t, range(2001, 30), { kubernetesPolicies: 6, netplugPolicies: 6 });
});

test('all pods on one node: compiled tables agree with the model', (t) => {
  check(t, range(3001, 40), { cluster: testCluster(() => 'node-1') });
});

test('explain gives the model verdict for every pod pair', (t) => {
  let compared = 0;
  for (const seed of range(4001, 40)) {
    const world = generateWorld(seed);
    const snapshot = snapshotOf(world);
    for (const probe of podProbes(world)) {
      if (!('pod' in probe.from) || !('pod' in probe.to)) continue;
      const explanation = explain(snapshot, {
        endpoint: probe.to.pod.key,
        peer: { endpoint: probe.from.pod.key },
        port: { port: probe.port, protocol: probe.protocol },
        direction: 'ingress',
      });
      const verdict = explanation.flows[0]?.verdict;
      const expected = expectedVerdict(world, probe);
      if (verdict !== expected) {
        t.fail(
          `seed ${seed}: ${describeProbe(probe)}: model ${expected}, explain ${verdict}\n${JSON.stringify(explanation.flows, null, 1)}\n${describeWorld(world)}`,
        );
        return;
      }
      compared++;
    }
  }
  // Pod pairs were compared at all (the loop skips probes to or from outside addresses).
  t.true(compared > 1000, `${compared} pod pairs compared`);
});
