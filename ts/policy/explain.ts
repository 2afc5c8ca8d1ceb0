// explain: for one endpoint, the policies that apply to it per direction in evaluation order, and,
// for a peer (an endpoint or an address) and a port, what each side decides and which policy and
// rule decided it: the source's egress, then the destination's ingress, both of which must allow.
// It reads the same programs the compiler writes to nftables, with the cluster as given (every
// endpoint, not only one node's).
import {
  DEFAULT_TIER,
  PROTOCOL_NUMBERS,
  type NetworkPolicyResource,
  type NetworkSetResource,
  type ProfileResource,
  type TierResource,
} from '../model/policy.ts';
import { matches } from '../selectors/evaluate.ts';
import { parseSelector } from '../selectors/parse.ts';
import type { Labels, Selector } from '../selectors/syntax.ts';
import { covers, merged, netInterval, parseAddress, type Family, type Interval } from './addresses.ts';
import { endpointLabels, networkSetLabels, profilesOf, type EndpointInput } from './endpoints.ts';
import { policyDecision, type Packet, type Resolver } from './evaluate.ts';
import { byTier, DEFAULT_TIER_INFO, missingTier, tierInfo, type TierInfo } from './order.ts';
import { appliesAt, policyProgram, profileProgram, type Direction, type PolicyProgram, type ProgramIssue } from './program.ts';

/** Everything explain reads: the cluster's endpoints, profiles, network sets, policies (Kubernetes ones converted) and tiers. */
export interface PolicySnapshot {
  endpoints: readonly EndpointInput[];
  profiles: readonly ProfileResource[];
  networkSets: readonly NetworkSetResource[];
  policies: readonly NetworkPolicyResource[];
  tiers: readonly TierResource[];
}

export interface ExplainQuery {
  /** The endpoint's key (`<namespace>/<pod>`). */
  endpoint: string;
  /** An endpoint's key, or an address. */
  peer?: { endpoint: string } | { address: string };
  /** Destination port and protocol (TCP, UDP, SCTP); with a peer, needed for a verdict. */
  port?: { port: number; protocol: string };
  /** Only this direction (of the endpoint): ingress is peer → endpoint, egress endpoint → peer. */
  direction?: Direction;
}

interface ExplainedPolicy {
  key: string;
  display: string;
  kind: PolicyProgram['kind'];
  tier: string;
  order?: number;
}

/** What decided at one side. */
export type DecidedBy =
  | { kind: 'rule'; policy: string; display: string; tier: string; rule: number; action: 'Allow' | 'Deny' }
  | { kind: 'end-of-tier'; tier: string }
  | { kind: 'profile'; profile: string; rule: number }
  | { kind: 'no-profile-allowed' };

export interface Decision {
  /** `egress` of the source, or `ingress` of the destination. */
  direction: Direction;
  /** The endpoint whose policies decide. */
  endpoint: string;
  verdict: 'allow' | 'deny';
  by: DecidedBy;
  /** Policies whose Pass rule sent the packet on to the next tier. */
  passedBy: { policy: string; rule: number }[];
  logged: { policy: string; rule: number }[];
}

interface Flow {
  /** `ingress`: peer → endpoint; `egress`: endpoint → peer. */
  direction: Direction;
  packet: { from: string; to: string; protocol: string; port: number };
  decisions: Decision[];
  verdict: 'allow' | 'deny';
}

export interface Explanation {
  endpoint: string;
  policies: Record<Direction, ExplainedPolicy[]>;
  flows: Flow[];
  /** Parts of the policies that apply which cannot be programmed (left out). */
  issues: (ProgramIssue & { policy: string })[];
}

export class ExplainError extends Error {
  override readonly name = 'ExplainError';
}

interface Entity {
  labels: Labels;
  intervals: { family: Family; interval: Interval }[];
  endpoint?: EndpointInput;
}

/** The explanation of `query` in `snapshot`; an ExplainError when the endpoint or peer is unknown. */
export function explain(snapshot: PolicySnapshot, query: ExplainQuery): Explanation {
  const profiles = new Map(snapshot.profiles.map((p) => [p.metadata.name, p]));
  const profileLabels = (name: string) => profiles.get(name)?.spec.labelsToApply;
  const entities: Entity[] = [];
  const endpoints = new Map<string, Entity>();
  for (const endpoint of snapshot.endpoints) {
    const entity: Entity = { labels: endpointLabels(endpoint, profileLabels), intervals: intervals(endpoint.addresses), endpoint };
    entities.push(entity);
    endpoints.set(endpoint.key, entity);
  }
  for (const set of snapshot.networkSets)
    entities.push({ labels: networkSetLabels(set, profileLabels), intervals: intervals(set.spec.nets ?? []) });
  const issues: Explanation['issues'] = [];
  const programs = snapshot.policies.flatMap((policy) => {
    const found: ProgramIssue[] = [];
    try {
      const program = policyProgram(policy, found);
      issues.push(...found.map((issue) => ({ policy: program.key, ...issue })));
      return [program];
    } catch (err) {
      issues.push({
        policy: `${policy.kind}/${policy.metadata.name}`,
        field: 'spec',
        message: `not programmed: ${(err as Error).message}`,
      });
      return [];
    }
  });
  const tiers = new Map(snapshot.tiers.map((t) => [t.metadata.name, tierInfo(t)]));
  const tierOf = (name: string): TierInfo => tiers.get(name) ?? (name === DEFAULT_TIER ? DEFAULT_TIER_INFO : missingTier(name));
  const resolver = resolverOf(entities);

  const target = endpoints.get(query.endpoint);
  if (!target?.endpoint) throw new ExplainError(`no endpoint "${query.endpoint}" is known`);
  const applying = (entity: Entity, direction: Direction) =>
    byTier(
      // Pods' traffic meets the policies of the endpoint hook: preDNAT and doNotTrack ones are host endpoints'.
      programs.filter((p) => p[direction] && appliesAt(p, 'endpoint') && matches(p.selects, entity.labels)),
      tierOf,
    );
  const listed = (direction: Direction): ExplainedPolicy[] =>
    applying(target, direction).flatMap(({ programs: list }) =>
      list.map((p) => ({
        key: p.key,
        display: p.display,
        kind: p.kind,
        tier: p.tier,
        ...(p.order !== undefined ? { order: p.order } : {}),
      })),
    );
  const relevant = new Set([...listed('ingress'), ...listed('egress')].map((p) => p.key));
  const explanation: Explanation = {
    endpoint: query.endpoint,
    policies: { ingress: listed('ingress'), egress: listed('egress') },
    flows: [],
    issues: issues.filter((issue) => relevant.has(issue.policy)),
  };
  if (!query.peer) return explanation;
  if (!query.port) throw new ExplainError('a verdict for a peer needs a port and protocol (80/TCP)');
  const protocol = PROTOCOL_NUMBERS[query.port.protocol.toUpperCase() as keyof typeof PROTOCOL_NUMBERS];
  if (protocol === undefined) throw new ExplainError(`protocol "${query.port.protocol}" must be TCP, UDP or SCTP`);
  let peer: Entity | undefined;
  let peerAddresses: { family: Family; value: bigint }[];
  let peerName: string;
  if ('endpoint' in query.peer) {
    peer = endpoints.get(query.peer.endpoint);
    if (!peer) throw new ExplainError(`no endpoint "${query.peer.endpoint}" is known`);
    peerAddresses = peer.intervals.map(({ family, interval }) => ({ family, value: interval.start }));
    peerName = query.peer.endpoint;
  } else {
    const address = parseAddress(query.peer.address);
    if (!address) throw new ExplainError(`peer "${query.peer.address}" is neither an endpoint (namespace/pod) nor an address`);
    peerAddresses = [address];
    peerName = query.peer.address;
    // An address of an endpoint is that endpoint: its own policies apply too.
    peer = entities.find((e) => e.endpoint && e.intervals.some((i) => i.family === address.family && i.interval.start === address.value));
  }
  const own = target.intervals.map(({ family, interval }) => ({ family, value: interval.start }));
  const pair = peerAddresses.flatMap((p) =>
    own.filter((o) => o.family === p.family).map((o) => ({ family: p.family, peer: p.value, own: o.value })),
  )[0];
  if (!pair) throw new ExplainError(`${query.endpoint} and ${peerName} have no address family in common`);
  const decide = (entity: Entity, direction: Direction, packet: Packet): Decision =>
    decision(entity, direction, packet, applying(entity, direction), profiles, resolver);
  for (const direction of query.direction ? [query.direction] : (['ingress', 'egress'] as const)) {
    const ingress = direction === 'ingress';
    const packet: Packet = {
      family: pair.family,
      source: ingress ? pair.peer : pair.own,
      destination: ingress ? pair.own : pair.peer,
      protocol,
      sourcePort: 40000,
      destinationPort: query.port.port,
    };
    const [source, destination] = ingress ? [peer, target] : [target, peer];
    const decisions: Decision[] = [];
    if (source?.endpoint) decisions.push(decide(source, 'egress', packet));
    if (destination?.endpoint) decisions.push(decide(destination, 'ingress', packet));
    explanation.flows.push({
      direction,
      packet: {
        from: ingress ? peerName : query.endpoint,
        to: ingress ? query.endpoint : peerName,
        protocol: query.port.protocol.toUpperCase(),
        port: query.port.port,
      },
      decisions,
      verdict: decisions.every((d) => d.verdict === 'allow') ? 'allow' : 'deny',
    });
  }
  return explanation;
}

function decision(
  entity: Entity,
  direction: Direction,
  packet: Packet,
  tiers: { tier: TierInfo; programs: PolicyProgram[] }[],
  profiles: ReadonlyMap<string, ProfileResource>,
  resolver: Resolver,
): Decision {
  const endpoint = entity.endpoint as EndpointInput;
  const passedBy: Decision['passedBy'] = [];
  const logged: Decision['logged'] = [];
  const done = (verdict: 'allow' | 'deny', by: DecidedBy): Decision => ({
    direction,
    endpoint: endpoint.key,
    verdict,
    by,
    passedBy,
    logged,
  });
  for (const { tier, programs } of tiers) {
    let passed = false;
    for (const program of programs) {
      const outcome = policyDecision(program, direction, packet, resolver);
      logged.push(...outcome.logged.map((rule) => ({ policy: program.key, rule: rule.index })));
      const rule = outcome.rule;
      if (!rule) continue;
      if (rule.action === 'Pass') {
        passedBy.push({ policy: program.key, rule: rule.index });
        passed = true;
        break;
      }
      return done(rule.action === 'Allow' ? 'allow' : 'deny', {
        kind: 'rule',
        policy: program.key,
        display: program.display,
        tier: program.tier,
        rule: rule.index,
        action: rule.action as 'Allow' | 'Deny',
      });
    }
    if (!passed && !tier.passes) return done('deny', { kind: 'end-of-tier', tier: tier.name });
  }
  for (const name of profilesOf(endpoint)) {
    const profile = profiles.get(name);
    if (!profile) continue;
    const outcome = policyDecision(profileProgram(profile), direction, packet, resolver);
    logged.push(...outcome.logged.map((rule) => ({ policy: `Profile/${name}`, rule: rule.index })));
    if (outcome.rule?.action === 'Allow') return done('allow', { kind: 'profile', profile: name, rule: outcome.rule.index });
    if (outcome.rule?.action === 'Deny') return done('deny', { kind: 'profile', profile: name, rule: outcome.rule.index });
  }
  return done('deny', { kind: 'no-profile-allowed' });
}

function intervals(texts: readonly string[]): Entity['intervals'] {
  return texts.flatMap((text) => netInterval(text) ?? []);
}

function resolverOf(entities: readonly Entity[]): Resolver {
  const parsed = new Map<string, Selector>();
  const selector = (text: string) => {
    const found = parsed.get(text) ?? parseSelector(text, { allowGlobal: true });
    parsed.set(text, found);
    return found;
  };
  const holding = (family: Family, address: bigint) =>
    entities.filter((e) => covers(merged(e.intervals.filter((i) => i.family === family).map((i) => i.interval)), address));
  return {
    selected: (text, family, address) => holding(family, address).some((e) => matches(selector(text), e.labels)),
    namedPort: (text, names, family, address, protocol, port) =>
      holding(family, address).some(
        (e) =>
          e.endpoint !== undefined &&
          e.intervals.some((i) => i.interval.start === address && i.interval.end === address) &&
          matches(selector(text), e.labels) &&
          (e.endpoint.ports ?? []).some(
            (p) => names.includes(p.name) && PROTOCOL_NUMBERS[p.protocol as keyof typeof PROTOCOL_NUMBERS] === protocol && p.port === port,
          ),
      ),
  };
}
