// What network policy means, as a pure function of the policies and one connection attempt,
// written from the Kubernetes NetworkPolicy API and netplug's policy resources, not from the
// compiler: Kubernetes label selectors evaluated here, namespace and service-account selectors
// against the namespace's and account's labels (no label prefixes), named ports looked up on the
// pod at the right end, tiers, orders, Pass, Deny, Log and profiles walked as the documentation
// says. Only netplug's selector language itself (ts/selectors) is shared with the compiler.
//
// A connection is allowed when the source's egress allows it (if the source is a pod) and the
// destination's ingress allows it (if it is a pod). Per side: the policies that apply, in order
// (tier order, tier name, then the policy's order, absent last, then its name); a Kubernetes
// NetworkPolicy is one of them, in tier default at order 1000, named knp.default.<name>, that
// allows what any of its rules allows. No policy for a side: allowed (the pod's profiles).
import { matches } from '../../ts/selectors/evaluate.ts';
import { parseSelector } from '../../ts/selectors/parse.ts';
import type { Labels, Selector } from '../../ts/selectors/syntax.ts';
import type { KubeNetworkPolicy, KubePeer, KubePort } from '../../ts/policy/kubernetes.ts';
import type { EntityRule, NetworkPolicyResource, NetworkSetResource, PolicyRule, Protocol, TierResource } from '../../ts/model/policy.ts';
import { parseIp, parsePrefix } from '../../ts/net/cidr.ts';
import type { TestCluster, TestPod } from './cluster.ts';

export interface PolicyWorld {
  cluster: TestCluster;
  kubernetesPolicies: KubeNetworkPolicy[];
  /** netplug NetworkPolicies and GlobalNetworkPolicies, as written (defaults not filled in). */
  policies: NetworkPolicyResource[];
  networkSets: NetworkSetResource[];
  tiers: TierResource[];
}

export type ProbePeer = { pod: TestPod } | { address: string };

export interface Probe {
  from: ProbePeer;
  to: ProbePeer;
  family: 4 | 6;
  protocol: 'TCP' | 'UDP' | 'SCTP' | 'ICMP';
  /** Destination port (TCP, UDP, SCTP). */
  port: number;
  sourcePort?: number;
  /** ICMP: echo request (8 / 128) unless given. */
  icmpType?: number;
  icmpCode?: number;
}

export type Verdict = 'allow' | 'deny';

export const PROTOCOL_NUMBER: Record<string, number> = { TCP: 6, UDP: 17, ICMP: 1, ICMPv6: 58, SCTP: 132, UDPLite: 136 };
export const SOURCE_PORT = 40000;

export const addressOf = (peer: ProbePeer, family: 4 | 6): string =>
  'pod' in peer ? (family === 4 ? peer.pod.ipv4 : peer.pod.ipv6) : peer.address;

/** Whether the connection attempt is let through, all policies considered. */
export function expectedVerdict(world: PolicyWorld, probe: Probe): Verdict {
  const egress = 'pod' in probe.from ? sideVerdict(world, probe.from.pod, 'egress', probe) : 'allow';
  const ingress = 'pod' in probe.to ? sideVerdict(world, probe.to.pod, 'ingress', probe) : 'allow';
  return egress === 'allow' && ingress === 'allow' ? 'allow' : 'deny';
}

interface Applied {
  tier: string;
  tierOrder: number;
  order: number;
  name: string;
  kind: string;
  /** The first decisive action of its rules for the probe, if any. */
  decide: () => 'Allow' | 'Deny' | 'Pass' | undefined;
}

/** What the pod's policies in one direction say of the probe. */
export function sideVerdict(world: PolicyWorld, pod: TestPod, direction: 'ingress' | 'egress', probe: Probe): Verdict {
  const applied: Applied[] = [];
  for (const policy of world.kubernetesPolicies) {
    if (!kubeSelects(policy, pod, direction)) continue;
    applied.push({
      tier: 'default',
      tierOrder: tierOrder(world, 'default'),
      order: 1000,
      name: `${policy.metadata.namespace}/knp.default.${policy.metadata.name}`,
      kind: 'NetworkPolicy',
      decide: () => (kubeAllows(world, policy, pod, direction, probe) ? 'Allow' : undefined),
    });
  }
  for (const policy of world.policies) {
    if (!netplugSelects(world, policy, pod, direction)) continue;
    const tier = policy.spec.tier ?? 'default';
    applied.push({
      tier,
      tierOrder: tierOrder(world, tier),
      order: policy.spec.order ?? Number.POSITIVE_INFINITY,
      name: policy.kind === 'NetworkPolicy' ? `${policy.metadata.namespace ?? 'default'}/${policy.metadata.name}` : policy.metadata.name,
      kind: policy.kind,
      decide: () => {
        for (const rule of policy.spec[direction] ?? []) {
          if (!ruleMatches(world, policy, rule, probe)) continue;
          if (rule.action !== 'Log') return rule.action;
        }
        return undefined;
      },
    });
  }
  if (applied.length === 0) return 'allow';
  const text = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  applied.sort(
    (a, b) => a.tierOrder - b.tierOrder || text(a.tier, b.tier) || a.order - b.order || text(a.name, b.name) || text(a.kind, b.kind),
  );
  let i = 0;
  while (i < applied.length) {
    const tier = (applied[i] as Applied).tier;
    let passed = false;
    for (; i < applied.length && (applied[i] as Applied).tier === tier; i++) {
      const action = (applied[i] as Applied).decide();
      if (action === 'Allow') return 'allow';
      if (action === 'Deny') return 'deny';
      if (action === 'Pass') {
        passed = true;
        while (i < applied.length && (applied[i] as Applied).tier === tier) i++;
        break;
      }
    }
    if (!passed && !tierPasses(world, tier)) return 'deny';
  }
  return 'allow'; // every tier passed: the profiles allow
}

function tierOrder(world: PolicyWorld, tier: string): number {
  if (tier === 'default') return 1_000_000;
  return world.tiers.find((t) => t.metadata.name === tier)?.spec.order ?? Number.POSITIVE_INFINITY;
}

function tierPasses(world: PolicyWorld, tier: string): boolean {
  return tier !== 'default' && world.tiers.find((t) => t.metadata.name === tier)?.spec.defaultAction === 'Pass';
}

// ---- Kubernetes NetworkPolicy ----

interface KubeLabelSelector {
  matchLabels?: Readonly<Record<string, string>> | null;
  matchExpressions?: readonly { key: string; operator: string; values?: readonly string[] | null }[] | null;
}

/** A Kubernetes label selector, evaluated as the API documents it. */
export function kubeSelectorMatches(selector: KubeLabelSelector, labels: Labels): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) if (labels[key] !== value) return false;
  for (const { key, operator, values } of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, key);
    const ok = {
      In: has && (values ?? []).includes(labels[key] as string),
      NotIn: !has || !(values ?? []).includes(labels[key] as string),
      Exists: has,
      DoesNotExist: !has,
    }[operator];
    if (!ok) return false;
  }
  return true;
}

function kubeTypes(policy: KubeNetworkPolicy): string[] {
  const given = policy.spec.policyTypes;
  if (given && given.length > 0) return given;
  return (policy.spec.egress?.length ?? 0) > 0 ? ['Ingress', 'Egress'] : ['Ingress'];
}

function kubeSelects(policy: KubeNetworkPolicy, pod: TestPod, direction: 'ingress' | 'egress'): boolean {
  return (
    (policy.metadata.namespace ?? 'default') === pod.namespace &&
    kubeSelectorMatches(policy.spec.podSelector ?? {}, pod.labels) &&
    kubeTypes(policy).includes(direction === 'ingress' ? 'Ingress' : 'Egress')
  );
}

const namespaceLabels = (world: PolicyWorld, name: string): Labels => world.cluster.namespaces.find((n) => n.name === name)?.labels ?? {};

function kubeAllows(world: PolicyWorld, policy: KubeNetworkPolicy, pod: TestPod, direction: 'ingress' | 'egress', probe: Probe): boolean {
  const peer = direction === 'ingress' ? probe.from : probe.to;
  const rules = direction === 'ingress' ? (policy.spec.ingress ?? []) : (policy.spec.egress ?? []);
  return rules.some((rule) => {
    const peers = (direction === 'ingress' ? (rule as { from?: KubePeer[] | null }).from : (rule as { to?: KubePeer[] | null }).to) ?? [];
    const peerOk = peers.length === 0 || peers.some((p) => kubePeerMatches(world, policy, p, peer, probe.family));
    const destination = direction === 'ingress' ? pod : 'pod' in probe.to ? probe.to.pod : undefined;
    const ports = rule.ports ?? [];
    const portOk = ports.length === 0 || ports.some((p) => kubePortMatches(p, probe, destination));
    return peerOk && portOk;
  });
}

function kubePeerMatches(world: PolicyWorld, policy: KubeNetworkPolicy, peer: KubePeer, at: ProbePeer, family: 4 | 6): boolean {
  if (peer.ipBlock) {
    const address = addressOf(at, family);
    return inCidr(address, peer.ipBlock.cidr) && !(peer.ipBlock.except ?? []).some((cidr) => inCidr(address, cidr));
  }
  if (!('pod' in at)) return false;
  const pod = at.pod;
  if (peer.namespaceSelector) {
    if (!kubeSelectorMatches(peer.namespaceSelector, namespaceLabels(world, pod.namespace))) return false;
  } else if (pod.namespace !== (policy.metadata.namespace ?? 'default')) return false;
  return peer.podSelector ? kubeSelectorMatches(peer.podSelector, pod.labels) : true;
}

function kubePortMatches(port: KubePort, probe: Probe, destination: TestPod | undefined): boolean {
  if ((port.protocol ?? 'TCP') !== probe.protocol) return false;
  if (port.port === undefined || port.port === null) return true;
  if (typeof port.port === 'number') return probe.port >= port.port && probe.port <= (port.endPort ?? port.port);
  return destination?.ports.some((p) => p.name === port.port && p.protocol === probe.protocol && p.port === probe.port) ?? false;
}

// ---- netplug policies ----

const parsed = new Map<string, Selector>();
function selector(text: string, allowGlobal = false): Selector {
  const key = `${allowGlobal}:${text}`;
  const found = parsed.get(key) ?? parseSelector(text, { allowGlobal });
  parsed.set(key, found);
  return found;
}

/** A labelled object an address may belong to: a pod, or a network set holding it. */
interface Holder {
  namespace: string | undefined;
  labels: Labels;
  pod?: TestPod;
}

function podLabels(pod: TestPod): Labels {
  return {
    ...pod.labels,
    'projectnet.org/namespace': pod.namespace,
    'projectnet.org/orchestrator': 'k8s',
    'projectnet.org/serviceaccount': pod.serviceAccount,
  };
}

function holders(world: PolicyWorld, address: string): Holder[] {
  const out: Holder[] = [];
  for (const pod of world.cluster.pods)
    if (pod.ipv4 === address || pod.ipv6 === address) out.push({ namespace: pod.namespace, labels: podLabels(pod), pod });
  for (const set of world.networkSets) {
    if (!(set.spec.nets ?? []).some((cidr) => inCidr(address, cidr))) continue;
    const namespace = set.kind === 'NetworkSet' ? (set.metadata.namespace ?? 'default') : undefined;
    const labels = { ...set.metadata.labels, ...(namespace ? { 'projectnet.org/namespace': namespace } : {}) };
    out.push({ namespace, labels });
  }
  return out;
}

/**
 * A namespaceSelector, of an object in `namespace` (undefined: in none): `all()` holds for any
 * namespaced object, `global()` for the others, and the rest reads the namespace's labels (with
 * projectnet.org/name, the namespace's name).
 */
function namespaceSelectorMatches(world: PolicyWorld, text: string, namespace: string | undefined): boolean {
  const labels = namespace === undefined ? {} : { ...namespaceLabels(world, namespace), 'projectnet.org/name': namespace };
  const evaluate = (node: Selector): boolean => {
    switch (node.kind) {
      case 'all':
        return namespace !== undefined;
      case 'global':
        return namespace === undefined;
      case 'not':
        return !evaluate(node.operand);
      case 'and':
        return node.operands.every(evaluate);
      case 'or':
        return node.operands.some(evaluate);
      default:
        return matches(node, labels);
    }
  };
  return evaluate(selector(text, true));
}

function serviceAccountLabels(world: PolicyWorld, pod: TestPod): Labels {
  const account = world.cluster.serviceAccounts.find((a) => a.namespace === pod.namespace && a.name === pod.serviceAccount);
  return { ...account?.labels, 'projectnet.org/name': pod.serviceAccount };
}

function netplugSelects(world: PolicyWorld, policy: NetworkPolicyResource, pod: TestPod, direction: 'ingress' | 'egress'): boolean {
  const { spec } = policy;
  const types = spec.types ?? ((spec.egress?.length ?? 0) > 0 ? ['Ingress', 'Egress'] : ['Ingress']);
  if (!types.includes(direction === 'ingress' ? 'Ingress' : 'Egress')) return false;
  if (policy.kind === 'NetworkPolicy' && (policy.metadata.namespace ?? 'default') !== pod.namespace) return false;
  if (!matches(selector(spec.selector ?? 'all()'), podLabels(pod))) return false;
  if (spec.namespaceSelector !== undefined && !namespaceSelectorMatches(world, spec.namespaceSelector, pod.namespace)) return false;
  if (spec.serviceAccountSelector !== undefined && !matches(selector(spec.serviceAccountSelector), serviceAccountLabels(world, pod)))
    return false;
  return true;
}

const protocolNumber = (p: Protocol) => (typeof p === 'number' ? p : (PROTOCOL_NUMBER[p] as number));

function ruleMatches(world: PolicyWorld, policy: NetworkPolicyResource, rule: PolicyRule, probe: Probe): boolean {
  const protocol = probe.protocol === 'ICMP' ? (probe.family === 4 ? 1 : 58) : (PROTOCOL_NUMBER[probe.protocol] as number);
  if (rule.ipVersion !== undefined && rule.ipVersion !== probe.family) return false;
  if (rule.protocol !== undefined && protocolNumber(rule.protocol) !== protocol) return false;
  if (rule.notProtocol !== undefined && protocolNumber(rule.notProtocol) === protocol) return false;
  const icmpType = probe.icmpType ?? (probe.family === 4 ? 8 : 128);
  const icmpCode = probe.icmpCode ?? 0;
  if (rule.icmp) {
    if (probe.protocol !== 'ICMP') return false;
    if (rule.icmp.type !== undefined && rule.icmp.type !== icmpType) return false;
    if (rule.icmp.code !== undefined && rule.icmp.code !== icmpCode) return false;
  }
  if (rule.notICMP) {
    if (probe.protocol !== 'ICMP') return false;
    const { type, code } = rule.notICMP;
    if (type !== undefined && type === icmpType && (code === undefined || code === icmpCode)) return false;
  }
  const namespace = policy.kind === 'NetworkPolicy' ? (policy.metadata.namespace ?? 'default') : undefined;
  const ported = probe.protocol !== 'ICMP';
  return (
    entityMatches(
      world,
      namespace,
      rule.source ?? {},
      addressOf(probe.from, probe.family),
      ported ? (probe.sourcePort ?? SOURCE_PORT) : undefined,
      protocol,
    ) &&
    entityMatches(world, namespace, rule.destination ?? {}, addressOf(probe.to, probe.family), ported ? probe.port : undefined, protocol)
  );
}

function entityMatches(
  world: PolicyWorld,
  policyNamespace: string | undefined,
  entity: EntityRule,
  address: string,
  port: number | undefined,
  protocol: number,
): boolean {
  if (entity.nets && !entity.nets.some((cidr) => inCidr(address, cidr))) return false;
  if (entity.notNets?.some((cidr) => inCidr(address, cidr))) return false;
  const found = holders(world, address);
  const accounts = entity.serviceAccounts;
  const usesAccounts = accounts !== undefined && ((accounts.names?.length ?? 0) > 0 || accounts.selector !== undefined);
  const own = entity.selector !== undefined || usesAccounts;
  const anySelector = own || entity.notSelector !== undefined || entity.namespaceSelector !== undefined;
  const scoped = entity.namespaceSelector !== undefined || policyNamespace !== undefined;
  /** Whether the end names this holder by its selector fields (true when it names none). */
  const named = (holder: Holder): boolean => {
    if (!anySelector || (!scoped && !own)) return true;
    if (entity.namespaceSelector !== undefined) {
      if (!namespaceSelectorMatches(world, entity.namespaceSelector, holder.namespace)) return false;
    } else if (policyNamespace !== undefined && holder.namespace !== policyNamespace) return false;
    if (entity.selector !== undefined && !matches(selector(entity.selector), holder.labels)) return false;
    if (usesAccounts) {
      if (!holder.pod) return false;
      if (accounts?.names && accounts.names.length > 0 && !accounts.names.includes(holder.pod.serviceAccount)) return false;
      if (accounts?.selector !== undefined && !matches(selector(accounts.selector), serviceAccountLabels(world, holder.pod))) return false;
    }
    return true;
  };
  if (anySelector && (scoped || own) && !found.some(named)) return false;
  if (entity.notSelector !== undefined && found.some((h) => matches(selector(entity.notSelector as string), h.labels))) return false;
  const namedPort = (names: string[]) =>
    port !== undefined &&
    found.some(
      (h) =>
        h.pod !== undefined &&
        named(h) &&
        h.pod.ports.some((p) => names.includes(p.name) && PROTOCOL_NUMBER[p.protocol] === protocol && p.port === port),
    );
  const numbers = (list: (number | string)[]) => list.filter((p) => typeof p === 'number' || /^\d/.test(p));
  const names = (list: (number | string)[]) => list.filter((p): p is string => typeof p === 'string' && !/^\d/.test(p));
  const inRange = (list: (number | string)[]) =>
    port !== undefined &&
    numbers(list).some((p) => {
      const [from, to = from] = String(p).split(':').map(Number) as [number, number?];
      return port >= from && port <= (to as number);
    });
  if (entity.notPorts && entity.notPorts.length > 0 && (inRange(entity.notPorts) || namedPort(names(entity.notPorts)))) return false;
  if (entity.ports && entity.ports.length > 0 && !(inRange(entity.ports) || namedPort(names(entity.ports)))) return false;
  return true;
}

export function inCidr(address: string, cidr: string): boolean {
  const ip = parseIp(address);
  const prefix = cidr.includes('/')
    ? parsePrefix(cidr)
    : parseIp(cidr) && { ...(parseIp(cidr) as { family: 4 | 6; value: bigint }), length: -1 };
  if (!ip || !prefix) return false;
  if ('value' in prefix) return prefix.family === ip.family && prefix.value === ip.value;
  const width = BigInt(prefix.family === 4 ? 32 : 128);
  const host = width - BigInt(prefix.length);
  return prefix.family === ip.family && ip.value >> host === prefix.base >> host;
}
