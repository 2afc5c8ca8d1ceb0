// Seeded generators of policy worlds over the test cluster (cluster.ts): Kubernetes NetworkPolicies
// and netplug policies using every field (selectors of every shape, namespace and service-account
// selectors, ipBlock with except, nets and notNets, ports by number, range and name, endPort,
// protocols TCP, UDP, SCTP and ICMP, icmp/notICMP, Allow/Deny/Pass/Log, tiers, orders), network
// sets that overlap pod addresses, and the probes to compare. The same seed gives the same world.
import type { KubeNetworkPolicy, KubePeer, KubePort } from '../../ts/policy/kubernetes.ts';
import type { LabelSelector } from '../../ts/selectors/label-selector.ts';
import type { EntityRule, NetworkPolicyResource, NetworkSetResource, PolicyRule, TierResource } from '../../ts/model/policy.ts';
import { parsePrefix, within } from '../../ts/net/cidr.ts';
import { NAMESPACES, OUTSIDE, POD_NAMES, PORTS, PROTOCOLS, testCluster, type TestCluster } from './cluster.ts';
import type { PolicyWorld, Probe } from './model.ts';

/** A small seeded PRNG (mulberry32): reproducible worlds from a number. */
export class Random {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(below: number): number {
    return Math.floor(this.next() * below);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  /** 0..most items, no repeats. */
  some<T>(items: readonly T[], most: number): T[] {
    const pool = [...items];
    const out: T[] = [];
    for (let n = this.int(most + 1); n > 0 && pool.length > 0; n--) out.push(pool.splice(this.int(pool.length), 1)[0] as T);
    return out;
  }
}

// ---- Kubernetes NetworkPolicy ----

const POD_SELECTORS: LabelSelector[] = [
  {},
  { matchLabels: { pod: 'a' } },
  { matchLabels: { pod: 'b' } },
  { matchExpressions: [{ key: 'pod', operator: 'In', values: ['a', 'b'] }] },
  { matchExpressions: [{ key: 'pod', operator: 'NotIn', values: ['c'] }] },
  { matchExpressions: [{ key: 'pod', operator: 'Exists' }] },
  { matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }], matchLabels: { pod: 'c' } },
  { matchLabels: { pod: 'nobody' } },
];

const NAMESPACE_SELECTORS: LabelSelector[] = [
  {},
  { matchLabels: { ns: 'y' } },
  { matchExpressions: [{ key: 'ns', operator: 'In', values: ['x', 'z'] }] },
  { matchLabels: { 'kubernetes.io/metadata.name': 'x' } },
  { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['y'] }] },
];

const CIDRS_V4 = ['10.1.0.0/16', '10.0.0.0/8', '10.2.0.0/24', '10.3.0.2/32', '0.0.0.0/0', '192.168.5.0/24', '10.1.0.2/31'];
const CIDRS_V6 = ['fd00::/16', 'fd00:2::/32', 'fd00:1::1/128', '::/0', 'fd99::/64'];
const EXCEPT_V4 = ['10.1.0.1/32', '10.2.0.0/30', '10.3.0.0/24', '10.1.0.2/32'];
const EXCEPT_V6 = ['fd00:2::2/128', 'fd00:3::/32'];

function kubePeer(rng: Random): KubePeer {
  switch (rng.int(5)) {
    case 0:
      return { podSelector: rng.pick(POD_SELECTORS) };
    case 1:
      return { namespaceSelector: rng.pick(NAMESPACE_SELECTORS) };
    case 2:
      return { podSelector: rng.pick(POD_SELECTORS), namespaceSelector: rng.pick(NAMESPACE_SELECTORS) };
    default: {
      const v6 = rng.chance(0.25);
      const cidr = rng.pick(v6 ? CIDRS_V6 : CIDRS_V4);
      const except = rng.some(v6 ? EXCEPT_V6 : EXCEPT_V4, 2).filter((e) => contains(cidr, e));
      return { ipBlock: { cidr, ...(except.length > 0 ? { except } : {}) } };
    }
  }
}

/** Whether `inner` lies within `outer` (Kubernetes requires except inside cidr). */
function contains(outer: string, inner: string): boolean {
  const [o, i] = [parsePrefix(outer), parsePrefix(inner)];
  return o !== undefined && i !== undefined && within(i, o);
}

function kubePort(rng: Random): KubePort {
  const protocol = rng.pick([undefined, 'TCP', 'UDP', 'SCTP', 'TCP', 'UDP']);
  const with_ = (port: KubePort) => (protocol ? { ...port, protocol } : port);
  switch (rng.int(5)) {
    case 0:
    case 1:
      return with_({ port: rng.pick(PORTS) });
    case 2:
      return with_({ port: rng.pick(['serve-80-tcp', 'serve-81-udp', 'web', 'serve-81-tcp', 'none']) });
    case 3:
      return with_({ port: 79, endPort: rng.pick([80, 81]) });
    default:
      return with_({});
  }
}

function kubeRules(rng: Random, peerKey: 'from' | 'to'): { from?: KubePeer[]; to?: KubePeer[]; ports?: KubePort[] }[] {
  return Array.from({ length: rng.int(3) }, () => {
    const peers = rng.pick([undefined, [], 'some', 'some'] as const);
    const ports = rng.pick([undefined, [], 'some', 'some'] as const);
    return {
      ...(peers === undefined ? {} : { [peerKey]: peers === 'some' ? Array.from({ length: 1 + rng.int(2) }, () => kubePeer(rng)) : [] }),
      ...(ports === undefined ? {} : { ports: ports === 'some' ? Array.from({ length: 1 + rng.int(2) }, () => kubePort(rng)) : [] }),
    };
  });
}

export function generateKubePolicy(rng: Random, name: string): KubeNetworkPolicy {
  const types = rng.pick([undefined, ['Ingress'], ['Egress'], ['Ingress', 'Egress']]);
  const ingress = rng.chance(0.8) ? kubeRules(rng, 'from') : undefined;
  const egress = rng.chance(0.6) ? kubeRules(rng, 'to') : undefined;
  return {
    metadata: { name, namespace: rng.pick(NAMESPACES) },
    spec: {
      podSelector: rng.pick(POD_SELECTORS),
      ...(types ? { policyTypes: types } : {}),
      ...(ingress ? { ingress } : {}),
      ...(egress ? { egress } : {}),
    },
  };
}

// ---- netplug policies ----

export const TEST_TIERS: TierResource[] = [
  { kind: 'Tier', apiVersion: 'projectnet.org/v3', metadata: { name: 'security' }, spec: { order: 100 } },
  { kind: 'Tier', apiVersion: 'projectnet.org/v3', metadata: { name: 'platform' }, spec: { order: 500, defaultAction: 'Pass' } },
];

const SELECTORS = [
  'all()',
  'pod == "a"',
  'pod in {"a", "b"}',
  'pod != "c"',
  'has(pod)',
  '!has(nope)',
  'projectnet.org/namespace == "y"',
  'pod starts with "b"',
];
const GLOBAL_NAMESPACE_SELECTORS = ['ns == "x"', 'all()', 'ns in {"y", "z"}', 'projectnet.org/name == "z"', 'ns != "y"'];
const ACCOUNT_SELECTORS = ['tier == "front"', 'projectnet.org/name == "back"', 'has(tier)', '!has(tier)'];
const RULE_SELECTORS = [
  'pod == "a"',
  'pod in {"b", "c"}',
  'set == "outside"',
  'all()',
  '!has(pod)',
  'set == "inside"',
  'pod == "c" || set == "inside"',
];
const RULE_NAMESPACE_SELECTORS = ['ns == "y"', 'all()', 'global()', 'ns != "x"', 'projectnet.org/name in {"x", "z"}'];
const NETS = {
  4: [['10.1.0.0/16'], ['10.2.0.0/24', '10.3.0.0/24'], ['10.0.0.0/8'], ['192.168.5.0/24'], ['10.2.0.2', '10.3.0.1/32']],
  6: [['fd00:1::/32'], ['fd00::/16'], ['fd99::/64', 'fd00:2::2']],
};
const NOT_NETS = {
  4: [['10.1.0.1/32'], ['10.2.0.0/16'], ['10.1.0.0/30', '10.2.0.3', '10.3.0.0/31', '10.9.0.0/16']],
  6: [['fd00:3::/32'], ['fd00:1::2']],
};

function entity(rng: Random, options: { ports: boolean; family?: 4 | 6 }): EntityRule {
  const out: EntityRule = {};
  const family = options.family ?? (rng.chance(0.8) ? 4 : 6);
  if (rng.chance(0.2)) out.nets = rng.pick(NETS[family]);
  if (rng.chance(0.15)) out.notNets = rng.pick(NOT_NETS[family]);
  if (rng.chance(0.4)) out.selector = rng.pick(RULE_SELECTORS);
  if (rng.chance(0.1)) out.notSelector = rng.pick(['pod == "b"', 'set == "outside"', 'pod == "a"']);
  if (rng.chance(0.2)) out.namespaceSelector = rng.pick(RULE_NAMESPACE_SELECTORS);
  if (rng.chance(0.1))
    out.serviceAccounts = rng.pick([
      { names: ['front'] },
      { selector: 'tier == "back"' },
      { names: ['back', 'default'], selector: '!has(tier)' },
    ]);
  if (options.ports && rng.chance(0.5))
    out.ports = rng.pick([[80], [81], ['80:81'], ['web'], ['serve-80-tcp', 81], ['none'], [80, 'serve-81-udp'], ['1:80', 443]]);
  if (options.ports && rng.chance(0.35)) out.notPorts = rng.pick([[80], ['web'], [81, 'serve-80-udp'], [1, 2, 3, 4, 5]]);
  return out;
}

function netplugRule(rng: Random): PolicyRule {
  const action = rng.pick(['Allow', 'Allow', 'Allow', 'Deny', 'Deny', 'Pass', 'Log'] as const);
  const protocol = rng.pick([undefined, undefined, 'TCP', 'UDP', 'ICMP', 6, 17, 'SCTP'] as const);
  const rule: PolicyRule = { action };
  if (protocol !== undefined) rule.protocol = protocol;
  const ported = protocol === 'TCP' || protocol === 'UDP' || protocol === 'SCTP' || protocol === 6 || protocol === 17;
  if (!protocol && rng.chance(0.1)) rule.notProtocol = rng.pick(['UDP', 'TCP'] as const);
  let family: 4 | 6 | undefined;
  if (protocol === 'ICMP') {
    family = 4;
    const which = rng.int(4);
    if (which < 2) rule.icmp = rng.pick([{ type: 8 }, { type: 8, code: 0 }, { type: 0 }]);
    else if (which === 2) rule.notICMP = rng.pick([{ type: 8 }, { type: 8, code: 1 }, { type: 3 }]);
  } else if (rng.chance(0.15)) family = rng.pick([4, 6] as const);
  if (family !== undefined && protocol !== 'ICMP' && rng.chance(0.7)) rule.ipVersion = family;
  if (protocol === 'ICMP' && rng.chance(0.3)) rule.ipVersion = 4;
  if (rng.chance(0.6)) rule.source = entity(rng, { ports: ported && rng.chance(0.2), ...(family ? { family } : {}) });
  if (rng.chance(0.6)) rule.destination = entity(rng, { ports: ported, ...(family ? { family } : {}) });
  return rule;
}

export function generateNetplugPolicy(rng: Random, name: string): NetworkPolicyResource {
  const global = rng.chance(0.4);
  const types = rng.pick([undefined, undefined, ['Ingress'], ['Egress'], ['Ingress', 'Egress']] as const);
  const ingress =
    (!types || types.includes('Ingress' as never)) && rng.chance(0.85)
      ? Array.from({ length: rng.int(4) }, () => netplugRule(rng))
      : undefined;
  const egress =
    (types ? types.includes('Egress' as never) : rng.chance(0.5)) && rng.chance(0.85)
      ? Array.from({ length: rng.int(4) }, () => netplugRule(rng))
      : undefined;
  const spec: NetworkPolicyResource['spec'] = {};
  if (rng.chance(0.3)) spec.tier = rng.pick(['security', 'platform', 'default']);
  if (rng.chance(0.6)) spec.order = rng.pick([1, 10, 100, 1000, 1000.5, 2000]);
  if (rng.chance(0.8)) spec.selector = rng.pick(SELECTORS);
  if (global && rng.chance(0.4)) spec.namespaceSelector = rng.pick(GLOBAL_NAMESPACE_SELECTORS);
  if (rng.chance(0.15)) spec.serviceAccountSelector = rng.pick(ACCOUNT_SELECTORS);
  if (types) spec.types = [...types];
  if (ingress) spec.ingress = ingress;
  if (egress) spec.egress = egress;
  return {
    kind: global ? 'GlobalNetworkPolicy' : 'NetworkPolicy',
    apiVersion: 'projectnet.org/v3',
    metadata: global ? { name } : { name, namespace: rng.pick(NAMESPACES) },
    spec,
  };
}

/** Network sets that share addresses with pods and with each other. */
export const TEST_NETWORK_SETS: NetworkSetResource[] = [
  {
    kind: 'GlobalNetworkSet',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'outside', labels: { set: 'outside' } },
    spec: { nets: ['192.168.5.0/24', 'fd99::/64'] },
  },
  {
    kind: 'NetworkSet',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'inside', namespace: 'y', labels: { set: 'inside', pod: 'a' } },
    spec: { nets: ['10.3.0.0/24', '10.3.0.2/32', 'fd00:3::/32'] },
  },
  {
    kind: 'GlobalNetworkSet',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'wide', labels: { set: 'wide' } },
    spec: { nets: ['10.1.0.0/16'] },
  },
];

export interface WorldOptions {
  kubernetesPolicies?: number;
  netplugPolicies?: number;
  cluster?: TestCluster;
}

/** A world of random policies over the test cluster. */
export function generateWorld(seed: number, options: WorldOptions = {}): PolicyWorld {
  const rng = new Random(seed);
  const kubernetes = options.kubernetesPolicies ?? 1 + rng.int(3);
  const netplug = options.netplugPolicies ?? 1 + rng.int(3);
  return {
    cluster: options.cluster ?? testCluster(),
    kubernetesPolicies: Array.from({ length: kubernetes }, (_, i) => generateKubePolicy(rng, `k${i}`)),
    policies: Array.from({ length: netplug }, (_, i) => generateNetplugPolicy(rng, `p${i}`)),
    networkSets: netplug > 0 ? TEST_NETWORK_SETS : [],
    tiers: netplug > 0 ? TEST_TIERS : [],
  };
}

/** Every pod to every pod (itself included) on ports 80 and 81 over TCP and UDP, IPv4. */
export function podProbes(world: PolicyWorld): Probe[] {
  const out: Probe[] = [];
  for (const from of world.cluster.pods)
    for (const to of world.cluster.pods)
      for (const port of PORTS)
        for (const protocol of PROTOCOLS) out.push({ from: { pod: from }, to: { pod: to }, family: 4, protocol, port });
  return out;
}

/** ICMP, SCTP, IPv6 and addresses outside the cluster: fewer, to keep the cases many. */
export function extraProbes(world: PolicyWorld, rng: Random): Probe[] {
  const pods = world.cluster.pods;
  const out: Probe[] = [];
  for (let i = 0; i < 12; i++) {
    const [from, to] = [rng.pick(pods), rng.pick(pods)];
    out.push({
      from: { pod: from },
      to: { pod: to },
      family: 4,
      protocol: 'ICMP',
      port: 0,
      ...(rng.chance(0.3) ? { icmpType: 8, icmpCode: 1 } : {}),
    });
    out.push({ from: { pod: from }, to: { pod: to }, family: 6, protocol: rng.pick(PROTOCOLS), port: rng.pick(PORTS) });
    out.push({ from: { pod: from }, to: { pod: to }, family: 4, protocol: 'SCTP', port: rng.pick(PORTS) });
    const outside = { address: rng.pick(OUTSIDE.ipv4) };
    out.push({ from: outside, to: { pod: to }, family: 4, protocol: rng.pick(PROTOCOLS), port: rng.pick(PORTS) });
    out.push({ from: { pod: from }, to: outside, family: 4, protocol: rng.pick(PROTOCOLS), port: rng.pick(PORTS) });
    out.push({ from: { address: OUTSIDE.ipv6[0] }, to: { pod: to }, family: 6, protocol: 'TCP', port: rng.pick(PORTS) });
  }
  return out;
}

export { NAMESPACES, POD_NAMES };
