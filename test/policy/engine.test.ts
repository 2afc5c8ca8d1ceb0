// The engine's contract with the agent: the fixed chains (fail closed) are there from the start;
// only policies selecting a local endpoint, and the sets they use, are programmed; membership
// changes elsewhere are element changes; a policy that cannot be programmed is reported and the
// others keep working; order, counters and logs are as documented.
import test from 'ava';

import type { Chain, TablePart } from '../../ts/nft/model.ts';
import { renderRule } from '../../ts/nft/render.ts';
import type { NetworkPolicyResource } from '../../ts/model/policy.ts';
import { checkPolicyDocument } from '../../ts/model/policy-check.ts';
import { PolicyEngine } from '../../ts/policy/engine.ts';
import type { EndpointInput } from '../../ts/policy/endpoints.ts';
import { namespaceProfile, serviceAccountProfile } from '../../ts/policy/kubernetes.ts';
import { denyCounterName, policyChainName } from '../../ts/policy/names.ts';

const chain = (part: TablePart, name: string): Chain | undefined => part.chains?.find((c) => c.name === name);
const rules = (part: TablePart, name: string) => (chain(part, name)?.rules ?? []).map(renderRule);
/** An endpoint chain's rules, its last (the goto to its policy list) replaced by the list's rules: the path a packet walks. */
const walked = (part: TablePart, name: string) => {
  const own = chain(part, name)?.rules ?? [];
  const last = own.at(-1)?.verdict;
  const list = typeof last === 'object' && last !== null && 'goto' in last ? last.goto : undefined;
  return list === undefined ? own.map(renderRule) : [...own.slice(0, -1).map(renderRule), ...rules(part, list)];
};

const pod = (
  name: string,
  node: string,
  labels: Record<string, string>,
  address: string,
  extra: Partial<EndpointInput> = {},
): EndpointInput => ({
  key: `shop/${name}`,
  namespace: 'shop',
  name,
  labels,
  addresses: [address],
  node,
  ...(node === 'here' ? { interfaceName: `cali${name}` } : {}),
  ...extra,
});

const policy = (name: string, spec: object): NetworkPolicyResource =>
  checkPolicyDocument({
    apiVersion: 'projectnet.org/v3',
    kind: 'NetworkPolicy',
    metadata: { name, namespace: 'shop' },
    spec,
  }) as NetworkPolicyResource;

function engine(options: Partial<ConstructorParameters<typeof PolicyEngine>[0]> = {}): PolicyEngine {
  const e = new PolicyEngine({ nodeName: 'here', ...options });
  e.upsertProfile(namespaceProfile({ metadata: { name: 'shop', labels: { env: 'prod' } } }));
  e.upsertProfile(serviceAccountProfile({ metadata: { name: 'default', namespace: 'shop' } }));
  return e;
}

test('with no endpoint, the part already drops workload interfaces that are not dispatched (fail closed)', (t) => {
  const part = engine({ interfacePrefix: 'np' }).part();
  t.deepEqual(rules(part, 'from-wl-dispatch'), [
    'iifname vmap @from-wl',
    'iifname "np*" counter name "fail-closed" drop comment "fail closed: workload interface not programmed"',
  ]);
  t.deepEqual(rules(part, 'to-wl-dispatch'), [
    'oifname vmap @to-wl',
    'oifname "np*" counter name "fail-closed" drop comment "fail closed: workload interface not programmed"',
  ]);
  t.deepEqual(
    ['filter-forward', 'filter-input', 'filter-output'].map((name) => chain(part, name)?.base),
    [
      { type: 'filter', hook: 'forward', priority: 10 },
      { type: 'filter', hook: 'input', priority: 10 },
      { type: 'filter', hook: 'output', priority: 10 },
    ],
  );
  t.deepEqual(rules(part, 'filter-output'), ['oifname "np*" accept comment "the host reaches its own workloads unpoliced"']);
  t.deepEqual(
    part.maps?.map((m) => [m.name, m.elements]),
    [
      ['from-wl', []],
      ['to-wl', []],
    ],
  );
});

test('a local endpoint gets dispatch entries and chains: anti-spoofing, conntrack, profiles, final drop', (t) => {
  const e = engine();
  e.upsertEndpoint(pod('a', 'here', { app: 'a' }, '10.0.0.1/32', { addresses: ['10.0.0.1/32', 'fd00::1/128'] }));
  t.is(e.programmedInterface('shop/a'), undefined, 'not before the flush that builds it');
  t.true(e.flush().structural);
  t.is(e.programmedInterface('shop/a'), 'calia');
  const part = e.part();
  t.deepEqual(part.maps?.[0]?.elements, [{ key: 'calia', verdict: { goto: 'fw-calia' } }]);
  t.deepEqual(part.maps?.[1]?.elements, [{ key: 'calia', verdict: { goto: 'tw-calia' } }]);
  t.regex(rules(part, 'fw-calia').at(-1) ?? '', /^goto plo-[0-9a-f]{16}$/, 'the endpoint chain goes to its policy list');
  t.deepEqual(walked(part, 'fw-calia'), [
    'ip saddr != 10.0.0.1 drop comment "anti-spoofing"',
    'ip6 saddr != fe80::/10 ip6 saddr != :: ip6 saddr != fd00::1 drop comment "anti-spoofing"',
    'meta l4proto 58 jump wl-icmpv6-nd',
    'ct state established,related accept',
    'ct state invalid drop',
    'meta mark set meta mark & 0xfffcffff',
    `jump ${policyChainName('Profile/kns.shop', 'egress')} comment "profile kns.shop"`,
    `meta mark & 0x10000 == 0x0 jump ${policyChainName('Profile/ksa.shop.default', 'egress')} comment "profile ksa.shop.default"`,
    'meta mark & 0x10000 == 0x10000 return',
    'counter name "default-deny" drop comment "no policy or profile allowed"',
  ]);
  t.is(rules(part, 'tw-calia')[0], 'meta l4proto 58 jump wl-icmpv6-nd', 'ingress has no anti-spoofing');
  e.upsertEndpoint(pod('b', 'here', {}, '10.0.0.2', { addresses: ['10.0.0.2'] }));
  t.is(
    rules(e.part(), 'fw-calib')[1],
    'ip6 saddr != fe80::/10 ip6 saddr != :: drop comment "anti-spoofing"',
    'no IPv6 address: link-local only',
  );
  e.upsertEndpoint(pod('c', 'here', {}, 'fd00::3'));
  t.is(rules(e.part(), 'fw-calic')[0], 'meta nfproto ipv4 drop comment "anti-spoofing: no IPv4 address"');
});

test('only policies selecting a local endpoint are programmed, with the sets they use; pods elsewhere are element changes', (t) => {
  const e = engine({ families: [4] });
  e.upsertEndpoint(pod('far', 'there', { app: 'db' }, '10.0.0.9'));
  e.upsertPolicy(policy('db', { selector: 'app == "db"', ingress: [{ action: 'Allow', source: { selector: 'app == "web"' } }] }));
  e.flush();
  const key = 'NetworkPolicy/shop/db';
  t.is(chain(e.part(), policyChainName(key, 'ingress')), undefined, 'selects no local endpoint');
  t.deepEqual(e.part().sets, []);

  e.upsertEndpoint(pod('web1', 'there', { app: 'web' }, '10.0.0.5'));
  e.upsertEndpoint(pod('db1', 'here', { app: 'db' }, '10.0.0.6'));
  t.true(e.flush().structural);
  const part = e.part();
  const set = part.sets?.[0];
  t.is(part.sets?.length, 1, 'one family asked for: one set');
  t.deepEqual(set?.elements, ['10.0.0.5']);
  t.deepEqual(rules(part, policyChainName(key, 'ingress')), [`ip saddr @${set?.name} accept comment "shop/db ingress rule 0"`]);
  t.false(part.counters?.includes(denyCounterName(key)), 'no Deny rule: no deny counter');
  t.deepEqual(e.endpointPolicies('shop/db1'), { ingress: [key], egress: [] });

  e.upsertEndpoint(pod('web2', 'there', { app: 'web' }, '10.0.0.7'));
  e.removeEndpoint('shop/web1');
  t.deepEqual(e.flush(), {
    structural: false,
    elements: { sets: [{ name: set?.name as string, add: ['10.0.0.7'], delete: ['10.0.0.5'] }] },
  });
  e.upsertEndpoint(pod('web2', 'there', { app: 'web', v: '2' }, '10.0.0.7'));
  t.deepEqual(e.flush(), { structural: false, elements: {} }, 'a label no selector reads changes nothing');

  e.removeEndpoint('shop/db1');
  t.true(e.flush().structural);
  t.deepEqual(e.part().maps?.[0]?.elements, []);
  t.truthy(chain(e.part(), policyChainName(key, 'ingress')), 'kept idle for a pod like db1 coming back');
  t.is(e.stats().activePolicies, 0, 'and not counted as programmed');
  e.upsertEndpoint(pod('db2', 'here', { app: 'db' }, '10.0.0.8'));
  e.flush();
  t.deepEqual(e.endpointPolicies('shop/db2'), { ingress: [key], egress: [] });
  e.removeEndpoint('shop/db2');
  e.removePolicy('NetworkPolicy', 'db', 'shop');
  e.flush();
  t.is(chain(e.part(), policyChainName(key, 'ingress')), undefined, 'gone with the policy');
  t.deepEqual(e.part().sets, [], 'the set went with its last user');
});

test('a named port of a protocol is looked up with its protocol: the rule compares the protocol on its own only where it reads a port alone', (t) => {
  const e = engine({ families: [4] });
  e.upsertEndpoint(pod('db1', 'here', { app: 'db' }, '10.0.0.6', { ports: [{ name: 'pg', protocol: 'TCP', port: 5432 }] }));
  e.upsertPolicy(
    policy('db', {
      selector: 'app == "db"',
      ingress: [
        { action: 'Allow', protocol: 'TCP', destination: { ports: ['pg'] } },
        { action: 'Allow', protocol: 'TCP', destination: { ports: ['pg'], notPorts: [81] } },
        { action: 'Allow', protocol: 'UDP', destination: { ports: ['pg'] } },
      ],
    }),
  );
  e.flush();
  const part = e.part();
  const named = part.sets?.filter((s) => Array.isArray(s.type)) ?? [];
  const [tcp, udp] = [1, 0].map((size) => named.find((s) => s.elements?.length === size));
  t.is(named.length, 2);
  t.deepEqual(tcp?.elements, [['10.0.0.6', 6, 5432]], 'the named port of TCP only');
  t.deepEqual(udp?.elements, [], 'none of UDP');
  const mark = 'accept';
  t.deepEqual(rules(part, policyChainName('NetworkPolicy/shop/db', 'ingress')), [
    `ip daddr . meta l4proto . th dport @${tcp?.name} ${mark} comment "shop/db ingress rule 0"`,
    // A port read alone (here th dport != 81) needs the protocol compared first.
    `meta l4proto 6 th dport != 81 ip daddr . meta l4proto . th dport @${tcp?.name} ${mark} comment "shop/db ingress rule 1"`,
    `ip daddr . meta l4proto . th dport @${udp?.name} ${mark} comment "shop/db ingress rule 2"`,
  ]);
});

test("a namespaced policy's ingress naming numeric and named ports looks both up at once, at its own pods on this node", (t) => {
  const e = engine({ families: [4] });
  const ports = [{ name: 'pg', protocol: 'TCP', port: 5432 }] as const;
  e.upsertEndpoint(pod('db1', 'here', { app: 'db' }, '10.0.0.6', { ports: [...ports] }));
  e.upsertEndpoint(pod('db2', 'there', { app: 'db' }, '10.0.0.7', { ports: [...ports] }));
  e.upsertEndpoint(pod('web1', 'here', { app: 'web' }, '10.0.0.8', { ports: [...ports] }));
  e.upsertPolicy(
    policy('db', {
      selector: 'app == "db"',
      ingress: [
        { action: 'Allow', protocol: 'TCP', destination: { ports: [80, 'pg'] } },
        // A range stays a port comparison of its own.
        { action: 'Allow', protocol: 'TCP', destination: { ports: ['8000:8080', 'pg'] } },
      ],
    }),
  );
  e.flush();
  const part = e.part();
  const sets = new Map((part.sets ?? []).map((s) => [s.name, s]));
  const chainRules = rules(part, policyChainName('NetworkPolicy/shop/db', 'ingress'));
  const looked = chainRules.map((r) => /@(\S+)/.exec(r)?.[1]);
  t.is(chainRules.length, 3);
  t.regex(chainRules[0] as string, /^ip daddr \. meta l4proto \. th dport @np4-\S+ accept comment "shop\/db ingress rule 0"$/);
  t.deepEqual(
    sets.get(looked[0] as string)?.elements,
    [
      ['10.0.0.6', 6, 5432],
      ['10.0.0.6', 6, 80],
    ],
    "db1's named and numeric ports: not db2's (elsewhere) nor web1's (not selected)",
  );
  t.is(chainRules[1], 'meta nfproto ipv4 meta l4proto 6 th dport 8000-8080 accept comment "shop/db ingress rule 1"');
  t.deepEqual(sets.get(looked[2] as string)?.elements, [['10.0.0.6', 6, 5432]]);
  // db2 comes here: its elements join the set; the rules stay.
  e.upsertEndpoint(pod('db2', 'here', { app: 'db' }, '10.0.0.7', { ports: [...ports] }));
  e.flush();
  const after = e.part();
  t.deepEqual(rules(after, policyChainName('NetworkPolicy/shop/db', 'ingress')), chainRules);
  t.deepEqual(after.sets?.find((s) => s.name === looked[0])?.elements, [
    ['10.0.0.6', 6, 5432],
    ['10.0.0.6', 6, 80],
    ['10.0.0.7', 6, 5432],
    ['10.0.0.7', 6, 80],
  ]);
});

test('by default rules are made for IPv4 until an IPv6 address enters; then every programmed policy for both', (t) => {
  const e = engine();
  e.upsertEndpoint(pod('db1', 'here', { app: 'db' }, '10.0.0.6'));
  e.upsertEndpoint(pod('web1', 'there', { app: 'web' }, '10.0.0.5'));
  e.upsertPolicy(policy('db', { selector: 'app == "db"', ingress: [{ action: 'Allow', source: { selector: 'app == "web"' } }] }));
  e.flush();
  const ingress = policyChainName('NetworkPolicy/shop/db', 'ingress');
  const v4 = e.part();
  t.is(v4.sets?.length, 1, 'no IPv6 address anywhere: no IPv6 set');
  t.deepEqual(rules(v4, ingress), [`ip saddr @${v4.sets?.[0]?.name} accept comment "shop/db ingress rule 0"`]);

  // A dual-stack pod elsewhere: the policy is built again, for both families, its IPv6 set holding the pod's address.
  e.upsertEndpoint(pod('web2', 'there', { app: 'web' }, '10.0.0.7', { addresses: ['10.0.0.7', 'fd00::7'] }));
  t.true(e.flush().structural);
  const both = e.part();
  const v6 = both.sets?.find((set) => set.type === 'ipv6_addr');
  t.deepEqual(v6?.elements, ['fd00::7']);
  t.deepEqual(
    rules(both, ingress).map((rule) => rule.split(' @')[0]),
    ['ip saddr', 'ip6 saddr'],
  );

  // Families are not taken back: the last IPv6 address gone leaves the IPv6 rules, their set empty.
  e.removeEndpoint('shop/web2');
  e.flush();
  t.is(rules(e.part(), ingress).length, 2);
  t.deepEqual(e.part().sets?.find((set) => set.type === 'ipv6_addr')?.elements, []);
});

test('at most 64 programs no local endpoint needs stay programmed, the oldest dropped first', (t) => {
  const e = engine({ families: [4] });
  for (let i = 0; i < 70; i++) e.upsertPolicy(policy(`p${i}`, { selector: `app == "a${i}"`, ingress: [{ action: 'Allow' }] }));
  for (let i = 0; i < 70; i++) {
    e.upsertEndpoint(pod(`w${i}`, 'here', { app: `a${i}` }, `10.0.1.${i + 1}`));
    e.flush();
    e.removeEndpoint(`shop/w${i}`);
    e.flush();
  }
  const kept = (i: number) => chain(e.part(), policyChainName(`NetworkPolicy/shop/p${i}`, 'ingress')) !== undefined;
  t.deepEqual(
    [0, 7, 8, 69].map(kept),
    [false, false, true, true],
    'the 64 most recent kept: the profiles of the namespace and its service account (idle last) and 62 of the 70 policies',
  );
});

test('a network set overlapping pod addresses: one disjoint interval set; elements follow both', (t) => {
  const e = engine({ families: [4] });
  e.upsertEndpoint(pod('a', 'here', { app: 'a' }, '10.0.0.1'));
  e.upsertEndpoint(pod('b', 'there', { peer: 'yes' }, '10.1.0.5'));
  e.upsertNetworkSet({
    kind: 'NetworkSet',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'n', namespace: 'shop', labels: { peer: 'yes' } },
    spec: { nets: ['10.1.0.0/24', '10.1.0.128/25'] },
  });
  e.upsertPolicy(policy('p', { selector: 'app == "a"', ingress: [{ action: 'Allow', source: { selector: 'peer == "yes"' } }] }));
  e.flush();
  const name = e.part().sets?.[0]?.name as string;
  t.deepEqual(e.part().sets?.[0]?.elements, ['10.1.0.0/24'], 'the pod inside the network set adds no element');
  e.upsertNetworkSet({
    kind: 'NetworkSet',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'n', namespace: 'shop', labels: { peer: 'yes' } },
    spec: { nets: ['10.1.0.128/25'] },
  });
  t.deepEqual(e.flush(), {
    structural: false,
    elements: { sets: [{ name, add: ['10.1.0.5', '10.1.0.128/25'], delete: ['10.1.0.0/24'] }] },
  });
});

test('endpoints with the same policies and profiles share one policy list chain; a list no endpoint uses is kept until a chain it jumps to goes', (t) => {
  const e = engine();
  e.upsertPolicy(policy('web', { selector: 'app == "web"', ingress: [{ action: 'Allow' }] }));
  e.upsertEndpoint(pod('a', 'here', { app: 'web' }, '10.0.0.1'));
  e.upsertEndpoint(pod('b', 'here', { app: 'web' }, '10.0.0.2'));
  e.upsertEndpoint(pod('c', 'here', { app: 'db' }, '10.0.0.3'));
  e.flush();
  let part = e.part();
  const listOf = (name: string) => rules(part, name).at(-1);
  t.is(listOf('tw-calia'), listOf('tw-calib'), 'a and b go to one list');
  t.not(listOf('tw-calia'), listOf('tw-calic'), 'c has other policies');
  const lists = () => (part.chains ?? []).filter((c) => /^pl[io]-/.test(c.name)).map((c) => c.name);
  t.is(lists().length, 3, 'two ingress lists; one egress list, as the policy has no egress');
  const before = lists();
  e.upsertEndpoint(pod('d', 'here', { app: 'web' }, '10.0.0.4'));
  e.flush();
  part = e.part();
  t.deepEqual(lists(), before, 'a pod like a and b adds its own chains only');
  e.removeEndpoint('shop/c');
  e.flush();
  part = e.part();
  t.is(lists().length, 3, "c's list is kept for a pod like it");
  t.true(walked(part, 'tw-calid').some((r) => r.includes('shop/web')));
  // The policy gone, its chain goes, and so does every list that jumped to it.
  e.removePolicy('NetworkPolicy', 'web', 'shop');
  e.flush();
  part = e.part();
  t.is(lists().length, 2, 'one list per direction: profiles only');
  const names = new Set((part.chains ?? []).map((c) => c.name));
  const targets = (part.chains ?? []).flatMap((c) =>
    (c.rules ?? []).flatMap((r) => (typeof r.verdict === 'object' && r.verdict && 'jump' in r.verdict ? [r.verdict.jump] : [])),
  );
  t.true(
    targets.every((name) => names.has(name)),
    'no chain jumps to one not in the part',
  );
});

test('policies in order: tiers by order, then the policy order (absent last), then names; Log and Deny statements', (t) => {
  const e = engine({ families: [4], logGroup: 7, logPerSecond: 3 });
  e.upsertTier({
    kind: 'Tier',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'security' },
    spec: { order: 10, defaultAction: 'Pass' },
  });
  e.upsertEndpoint(pod('a', 'here', { app: 'a' }, '10.0.0.1'));
  e.upsertPolicy(
    policy('z-first', { order: 1, ingress: [{ action: 'Log' }, { action: 'Deny', protocol: 'TCP', destination: { ports: [22] } }] }),
  );
  e.upsertPolicy(policy('a-last', { ingress: [{ action: 'Allow' }] }));
  e.upsertPolicy(policy('b-second', { order: 5, ingress: [{ action: 'Pass' }] }));
  e.upsertPolicy(policy('sec', { tier: 'security', order: 100, ingress: [{ action: 'Pass' }] }));
  e.flush();
  t.deepEqual(e.endpointPolicies('shop/a').ingress, [
    'NetworkPolicy/shop/sec',
    'NetworkPolicy/shop/z-first',
    'NetworkPolicy/shop/b-second',
    'NetworkPolicy/shop/a-last',
  ]);
  const part = e.part();
  const tw = walked(part, 'tw-calia');
  t.true(tw.some((r) => r.endsWith('comment "tier security: shop/sec"')));
  t.false(
    tw.some((r) => r.includes('end of tier security')),
    'a tier passing by default has no drop at its end',
  );
  t.true(tw.some((r) => r === 'meta mark & 0x20000 == 0x0 counter name "default-deny" drop comment "end of tier default"'));
  const pi = (name: string) => policyChainName(`NetworkPolicy/shop/${name}`, 'ingress');
  t.deepEqual(
    tw.slice(3),
    [
      'meta mark set meta mark & 0xfffdffff',
      `jump ${pi('sec')} comment "tier security: shop/sec"`,
      'meta mark set meta mark & 0xfffdffff',
      `jump ${pi('z-first')} comment "tier default: shop/z-first"`,
      `jump ${pi('b-second')} comment "tier default: shop/b-second"`,
      `meta mark & 0x20000 == 0x0 jump ${pi('a-last')} comment "tier default: shop/a-last"`,
      'meta mark & 0x20000 == 0x0 counter name "default-deny" drop comment "end of tier default"',
      `jump ${policyChainName('Profile/kns.shop', 'ingress')} comment "profile kns.shop"`,
      `jump ${policyChainName('Profile/ksa.shop.default', 'ingress')} comment "profile ksa.shop.default"`,
      'counter name "default-deny" drop comment "no policy or profile allowed"',
    ],
    'ingress: an Allow accepts there and then; only the jumps after a policy that can pass are guarded',
  );
  const first = rules(part, policyChainName('NetworkPolicy/shop/z-first', 'ingress'));
  t.deepEqual(first, [
    'limit rate 3/second burst 3 packets log prefix "netplug shop/z-first ingress rule 0" group 7 comment "shop/z-first ingress rule 0"',
    `meta l4proto 6 th dport 22 counter name "${denyCounterName('NetworkPolicy/shop/z-first')}" drop comment "shop/z-first ingress rule 1"`,
  ]);
  t.is(e.policyOfCounter(denyCounterName('NetworkPolicy/shop/z-first')), 'NetworkPolicy/shop/z-first');
  const owner = e.denyCounters().get(denyCounterName('NetworkPolicy/shop/z-first'));
  t.deepEqual([owner?.kind, owner?.display], ['NetworkPolicy', 'shop/z-first'], 'the programmed policy behind a deny counter');
  t.true(
    ['default-deny', 'fail-closed'].every((name) => part.counters?.includes(name)),
    'the drops no rule decided have counters of their own',
  );
});

test('a policy that cannot be programmed is reported; the others keep working', (t) => {
  const e = engine({ families: [4] });
  e.upsertEndpoint(pod('a', 'here', { app: 'a' }, '10.0.0.1'));
  const broken = { ...policy('bad', {}), spec: { selector: 'app ==' } } as NetworkPolicyResource;
  const issues = e.upsertPolicy(broken);
  t.is(issues.length, 1);
  t.like(issues[0], { policy: 'NetworkPolicy/shop/bad', field: 'spec' });
  t.regex(issues[0]?.message ?? '', /^not programmed: selector "app =="/);
  const halfBroken = {
    ...policy('half', {}),
    spec: {
      selector: 'all()',
      types: ['Ingress'],
      ingress: [
        { action: 'Allow', source: { selector: '((' } },
        { action: 'Allow', protocol: 'TCP' },
      ],
    },
  } as NetworkPolicyResource;
  t.deepEqual(
    e.upsertPolicy(halfBroken).map((i) => i.field),
    ['spec.ingress[0]'],
  );
  e.flush();
  t.deepEqual(rules(e.part(), policyChainName('NetworkPolicy/shop/half', 'ingress')), [
    'meta l4proto 6 accept comment "shop/half ingress rule 1"',
  ]);
  t.deepEqual(
    e.issues().map((i) => `${i.policy} ${i.field}`),
    ['NetworkPolicy/shop/bad spec', 'NetworkPolicy/shop/half spec.ingress[0]'],
  );
});
