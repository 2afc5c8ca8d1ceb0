// The engine kept incrementally gives the same part as an engine fed the final state at once, after
// every random change (pods come, go, move, change labels and addresses; namespaces and service
// accounts change labels; network sets, policies and tiers come, change and go); and when a flush
// says only elements changed, those element changes applied to the previous part give the new
// part exactly. Compiled verdicts after the changes still agree with the model.
import test from 'ava';

import type { Element, ElementChanges, TablePart } from '../../ts/nft/model.ts';
import { checkPolicyDocument } from '../../ts/model/policy-check.ts';
import type { NetworkPolicyResource } from '../../ts/model/policy.ts';
import { convertKubernetesPolicy, namespaceProfile, serviceAccountProfile } from '../../ts/policy/kubernetes.ts';
import type { PolicyEngine } from '../../ts/policy/engine.ts';
import type { TestPod } from './cluster.ts';
import { generateKubePolicy, generateNetplugPolicy, generateWorld, podProbes, Random, TEST_NETWORK_SETS } from './generate.ts';
import { compiledVerdict, describeProbe, endpointOf, engineFor } from './harness.ts';
import { expectedVerdict, type PolicyWorld } from './model.ts';

const NODE = 'node-1';

/**
 * What of a part packets can meet: the chains reachable from its base chains (by jumps, gotos and
 * the maps' verdicts), and the sets, maps and counters those use. The engine keeps some programs
 * and policy lists no endpoint uses any more (a pod coming back writes less), which a fresh
 * compile has not: they are unreachable, so a packet cannot tell.
 */
function reachable(part: TablePart): TablePart {
  const chains = new Map((part.chains ?? []).map((c) => [c.name, c]));
  const maps = new Map((part.maps ?? []).map((m) => [m.name, m]));
  const seen = new Set<string>();
  const sets = new Set<string>();
  const counters = new Set<string>();
  const usedMaps = new Set<string>();
  const visit = (name: string) => {
    if (seen.has(name)) return;
    seen.add(name);
    for (const rule of chains.get(name)?.rules ?? []) {
      for (const match of rule.matches ?? [])
        if (typeof match.value === 'object' && match.value !== null && 'set' in match.value) sets.add(match.value.set);
      for (const statement of rule.statements ?? [])
        if ('counter' in statement && statement.counter.name) counters.add(statement.counter.name);
      const verdict = rule.verdict;
      if (typeof verdict !== 'object' || verdict === null) continue;
      if ('jump' in verdict) visit(verdict.jump);
      else if ('goto' in verdict) visit(verdict.goto);
      else if ('vmap' in verdict) {
        usedMaps.add(verdict.vmap.map);
        for (const element of maps.get(verdict.vmap.map)?.elements ?? []) {
          const to = element.verdict;
          if (typeof to === 'object' && to !== null && 'goto' in to) visit(to.goto);
          else if (typeof to === 'object' && to !== null && 'jump' in to) visit(to.jump);
        }
      }
    }
  };
  for (const chain of part.chains ?? []) if (chain.base) visit(chain.name);
  return {
    chains: (part.chains ?? []).filter((c) => seen.has(c.name)),
    sets: (part.sets ?? []).filter((x) => sets.has(x.name)),
    maps: (part.maps ?? []).filter((m) => usedMaps.has(m.name)),
    counters: (part.counters ?? []).filter((c) => counters.has(c)),
  };
}

/** A part with its lists in a fixed order, for comparison. */
function normalized(part: TablePart) {
  const byName = <T extends { name: string }>(list: T[] | undefined) => [...(list ?? [])].sort((a, b) => (a.name < b.name ? -1 : 1));
  const elements = (list: unknown[] | undefined) => (list ?? []).map((e) => JSON.stringify(e)).sort();
  return {
    chains: byName(part.chains),
    sets: byName(part.sets).map((s) => ({ ...s, elements: elements(s.elements) })),
    maps: byName(part.maps).map((m) => ({ ...m, elements: elements(m.elements) })),
    counters: [...(part.counters ?? [])].sort(),
  };
}

/** `changes` applied to a copy of `part`, as the writer applies them to the table it holds. */
function applied(part: TablePart, changes: ElementChanges): TablePart {
  const copy = structuredClone(part);
  const key = (e: unknown) => JSON.stringify(e);
  for (const change of changes.sets ?? []) {
    const set = copy.sets?.find((s) => s.name === change.name);
    if (!set) throw new Error(`element changes name set ${change.name}, which the part lacks`);
    const gone = new Set((change.delete ?? []).map(key));
    const kept = (set.elements ?? []).filter((e) => !gone.has(key(e)));
    for (const element of change.add ?? [])
      if (kept.some((e) => key(e) === key(element))) throw new Error(`${change.name}: ${key(element)} added twice`);
    set.elements = [...kept, ...(change.add ?? [])] as Element[];
  }
  for (const change of changes.maps ?? []) {
    const map = copy.maps?.find((m) => m.name === change.name);
    if (!map) throw new Error(`element changes name map ${change.name}, which the part lacks`);
    const gone = new Set((change.delete ?? []).map(key));
    map.elements = [...(map.elements ?? []).filter((e) => !gone.has(key(e.key))), ...(change.add ?? [])];
  }
  return copy;
}

type Change = (world: PolicyWorld, engine: PolicyEngine, rng: Random) => string;

const relabel = (pod: TestPod, rng: Random) => {
  pod.labels = rng.pick<Record<string, string>>([{ pod: pod.name }, { pod: rng.pick(['a', 'b', 'c']) }, { pod: pod.name, app: 'web' }, {}]);
};

const CHANGES: Change[] = [
  (world, engine, rng) => {
    const pod = rng.pick(world.cluster.pods);
    relabel(pod, rng);
    engine.upsertEndpoint(endpointOf(pod));
    return `relabel ${pod.key} ${JSON.stringify(pod.labels)}`;
  },
  (world, engine, rng) => {
    const pod = rng.pick(world.cluster.pods);
    pod.ipv4 = `10.${rng.int(4) + 1}.${rng.int(3)}.${rng.int(250) + 1}`;
    engine.upsertEndpoint(endpointOf(pod));
    return `readdress ${pod.key} ${pod.ipv4}`;
  },
  (world, engine, rng) => {
    const pod = rng.pick(world.cluster.pods);
    pod.node = pod.node === NODE ? 'node-2' : NODE;
    engine.upsertEndpoint(endpointOf(pod));
    return `move ${pod.key} to ${pod.node}`;
  },
  (world, engine, rng) => {
    const pods = world.cluster.pods;
    const pod = pods.splice(rng.int(pods.length), 1)[0] as TestPod;
    engine.removeEndpoint(pod.key);
    return `remove ${pod.key}`;
  },
  (world, engine, rng) => {
    const n = world.cluster.pods.length;
    const pod: TestPod = {
      key: `x/new${n}-${rng.int(1000)}`,
      namespace: rng.pick(['x', 'y', 'z']),
      name: `new${n}`,
      labels: { pod: rng.pick(['a', 'b', 'c']) },
      serviceAccount: rng.pick(['front', 'back', 'default']),
      ipv4: `10.4.0.${rng.int(250) + 1}`,
      ipv6: `fd00:4::${rng.int(250) + 1}`,
      node: rng.pick([NODE, 'node-2']),
      interfaceName: `calinew${n}${rng.int(100)}`,
      ports: [{ name: 'web', protocol: 'TCP', port: rng.pick([80, 81]) }],
    };
    pod.key = `${pod.namespace}/${pod.name}-${rng.int(1000)}`;
    pod.name = pod.key.split('/')[1] as string;
    world.cluster.pods.push(pod);
    engine.upsertEndpoint(endpointOf(pod));
    return `add ${pod.key} on ${pod.node}`;
  },
  (world, engine, rng) => {
    const namespace = rng.pick(world.cluster.namespaces);
    namespace.labels = { ...namespace.labels, ns: rng.pick(['x', 'y', 'z']) };
    engine.upsertProfile(namespaceProfile({ metadata: namespace }));
    return `namespace ${namespace.name} labels ${JSON.stringify(namespace.labels)}`;
  },
  (world, engine, rng) => {
    const account = rng.pick(world.cluster.serviceAccounts);
    account.labels = rng.pick<Record<string, string>>([{}, { tier: 'front' }, { tier: 'back' }]);
    engine.upsertProfile(serviceAccountProfile({ metadata: account }));
    return `service account ${account.namespace}/${account.name} labels ${JSON.stringify(account.labels)}`;
  },
  (world, engine, rng) => {
    const set = structuredClone(rng.pick(TEST_NETWORK_SETS));
    const known = world.networkSets.findIndex((s) => s.kind === set.kind && s.metadata.name === set.metadata.name);
    if (known >= 0 && rng.chance(0.5)) {
      world.networkSets.splice(known, 1);
      engine.removeNetworkSet(set.kind, set.metadata.name, set.metadata.namespace);
      return `remove network set ${set.metadata.name}`;
    }
    set.spec.nets = rng.chance(0.5) ? set.spec.nets : ['10.2.0.0/24', '10.2.0.2/32', '10.4.0.0/16'];
    if (known >= 0) world.networkSets[known] = set;
    else world.networkSets.push(set);
    engine.upsertNetworkSet(set);
    return `network set ${set.metadata.name} ${JSON.stringify(set.spec.nets)}`;
  },
  (world, engine, rng) => {
    const name = `gen${rng.int(6)}`;
    const policy = generateNetplugPolicy(rng, name);
    const at = world.policies.findIndex(
      (p) => p.kind === policy.kind && p.metadata.name === name && p.metadata.namespace === policy.metadata.namespace,
    );
    if (at >= 0) world.policies[at] = policy;
    else world.policies.push(policy);
    engine.upsertPolicy(checkPolicyDocument(policy) as NetworkPolicyResource);
    return `policy ${policy.kind} ${name}`;
  },
  (world, engine, rng) => {
    if (world.policies.length === 0) return 'no policy to remove';
    const policy = world.policies.splice(rng.int(world.policies.length), 1)[0] as NetworkPolicyResource;
    engine.removePolicy(policy.kind, policy.metadata.name, policy.metadata.namespace);
    return `remove policy ${policy.kind} ${policy.metadata.name}`;
  },
  (world, engine, rng) => {
    const name = `kgen${rng.int(4)}`;
    const policy = generateKubePolicy(rng, name);
    policy.metadata.namespace = 'x';
    world.kubernetesPolicies = world.kubernetesPolicies.filter((p) => p.metadata.name !== name || p.metadata.namespace !== 'x');
    world.kubernetesPolicies.push(policy);
    engine.upsertPolicy(convertKubernetesPolicy(policy).policy);
    return `kubernetes policy x/${name}`;
  },
  (world, engine, rng) => {
    const tier = rng.pick(world.tiers);
    if (!tier) return 'no tier';
    tier.spec = { order: rng.pick([50, 100, 2_000_000]), ...(rng.chance(0.5) ? { defaultAction: 'Pass' as const } : {}) };
    engine.upsertTier(tier);
    return `tier ${tier.metadata.name} ${JSON.stringify(tier.spec)}`;
  },
];

test('after every change, what packets meet of the incremental part equals a fresh compile, and element-only flushes are exact', (t) => {
  let elementOnly = 0;
  let structural = 0;
  for (let seed = 1; seed <= 40; seed++) {
    const world = structuredClone(generateWorld(seed, { kubernetesPolicies: 3, netplugPolicies: 3 }));
    world.networkSets = structuredClone(TEST_NETWORK_SETS);
    const { engine } = engineFor(world, NODE);
    let previous = engine.part();
    const rng = new Random(seed);
    const log: string[] = [];
    for (let step = 0; step < 25; step++) {
      const batch = 1 + rng.int(3);
      for (let i = 0; i < batch; i++) log.push((rng.pick(CHANGES) as Change)(world, engine, rng));
      const update = engine.flush();
      const now = engine.part();
      const fresh = engineFor(world, NODE).engine.part();
      const context = `seed ${seed}, after:\n${log.join('\n')}`;
      t.deepEqual(normalized(reachable(now)), normalized(reachable(fresh)), context);
      if (update.structural) structural++;
      else {
        elementOnly++;
        t.deepEqual(normalized(applied(previous, update.elements)), normalized(now), `element changes, ${context}`);
      }
      previous = now;
    }
    // The changed world still compiles to the model's verdicts (this node's pods at least).
    const parts = new Map([
      [NODE, engine.part()],
      ['node-2', engineFor(world, 'node-2').engine.part()],
    ]);
    for (const probe of podProbes(world)) {
      const expected = expectedVerdict(world, probe);
      const { verdict } = compiledVerdict(parts, probe);
      if (verdict !== expected) {
        t.fail(`seed ${seed}: ${describeProbe(probe)}: model ${expected}, compiled ${verdict} after\n${log.join('\n')}`);
        return;
      }
    }
  }
  t.log(`${structural} structural flushes, ${elementOnly} element-only ones`);
  t.true(elementOnly > 50);
});
