// The fixed chains of the policy part and the chains of each local endpoint.
//
// Packets from a workload (iifname) and to one (oifname) are dispatched by verdict maps keyed by
// the host-side interface to the endpoint's chains; a workload interface not in the map is
// dropped right after the lookup (fail closed: these rules stay in the kernel while the agent is
// stopped). In forward, the source's egress chain runs, returns when a policy allowed, and then
// the destination's ingress chain: both must allow. The host reaching its own workloads (output)
// is not policed, so kubelet probes work; a workload reaching the host (input) goes through its
// egress chain.
//
// An endpoint chain: (egress) drop sources that are not the workload's own addresses; ICMPv6
// neighbour discovery accepted (it has no conntrack state); established and related accepted,
// invalid dropped; then, by goto, its policy list, shared by the endpoints with the same policies:
// per tier with policies for the endpoint, each policy's chain while no policy of the tier passed,
// and a drop at the end of the tier unless the tier passes by default; then its profiles; then
// drop. An ingress Allow accepts there and then; an egress Allow returns with the accept mark and
// the list returns at once, so that the destination's ingress runs next. These drops and the
// fail-closed ones count into named counters (DEFAULT_DENY_COUNTERS), which /metrics reads.
import { baseChain, jump, match, notMatch, PRIORITY, regularChain, rule } from '../nft/build.ts';
import type { Chain, MapElement, Match, Rule, Statement } from '../nft/model.ts';
import { CHAINS, DEFAULT_DENY_COUNTERS, endpointChainName, MAPS, MARK, policyListChainName } from './names.ts';
import { listEndFlowPrefix, tierEndFlowPrefix } from './flow-prefix.ts';
import type { Direction } from './program.ts';

export interface TierPlan {
  name: string;
  /** The tier passes to the next when none of its policies decided (else it drops). */
  passes: boolean;
  /** In order; `canPass`: the policy has a Pass rule in this direction. */
  policies: { display: string; chain: string; canPass: boolean }[];
}

export interface EndpointPlan {
  interfaceName: string;
  /** The workload's own addresses: the only sources it may send from (besides IPv6 link-local). */
  addresses: { 4: string[]; 6: string[] };
  /** Per direction, the tiers with policies for it, in order. */
  tiers: Record<Direction, TierPlan[]>;
  /** Its profiles' chains, in order; a profile with no rules in a direction has none. */
  profiles: { display: string; ingress?: string; egress?: string }[];
}

const failClosed = [{ counter: { name: DEFAULT_DENY_COUNTERS.failClosed } }];
const noPolicyAllowed = [{ counter: { name: DEFAULT_DENY_COUNTERS.noPolicyAllowed } }];

/** The priority of the base chains: after iptables-nft's filter chains (0) and kube-proxy's. */
export const POLICY_PRIORITY = PRIORITY.filter + 10;

const ND_TYPES = [133, 134, 135, 136, 137];

/** The base chains, dispatch chains and the neighbour-discovery chain (the maps are the engine's). */
export function fixedChains(interfacePrefix: string): Chain[] {
  const wildcard = `${interfacePrefix}*`;
  return [
    baseChain(CHAINS.forward, { type: 'filter', hook: 'forward', priority: POLICY_PRIORITY }, [
      rule([], jump(CHAINS.fromDispatch), 'workload egress'),
      rule([], jump(CHAINS.toDispatch), 'workload ingress'),
    ]),
    baseChain(CHAINS.input, { type: 'filter', hook: 'input', priority: POLICY_PRIORITY }, [
      rule([], jump(CHAINS.fromDispatch), 'workload to host: its egress'),
    ]),
    baseChain(CHAINS.output, { type: 'filter', hook: 'output', priority: POLICY_PRIORITY }, [
      rule([match('oifname', wildcard)], 'accept', 'the host reaches its own workloads unpoliced'),
    ]),
    regularChain(CHAINS.fromDispatch, [
      rule([], { vmap: { key: 'iifname', map: MAPS.from } }),
      rule([match('iifname', wildcard)], 'drop', 'fail closed: workload interface not programmed', failClosed),
    ]),
    regularChain(CHAINS.toDispatch, [
      rule([], { vmap: { key: 'oifname', map: MAPS.to } }),
      rule([match('oifname', wildcard)], 'drop', 'fail closed: workload interface not programmed', failClosed),
    ]),
    regularChain(
      CHAINS.neighbourDiscovery,
      ND_TYPES.map((type) => rule([match('icmpv6 type', type)], 'accept')),
    ),
  ];
}

export const markClear = (bits: number): Rule => rule([], undefined, undefined, [{ mark: { clear: bits } }]);
const bitClear = (bit: number): Match => ({ key: 'meta mark', mask: bit, value: 0 });
export const bitSet = (bit: number): Match => ({ key: 'meta mark', mask: bit, value: bit });

/**
 * How a policy list ends when no policy allowed: `drop` (an endpoint's own traffic), `tiers` (a
 * tier whose policies did not decide drops; a packet every tier passed returns: forwarded traffic
 * through a host endpoint), `return` (nothing dropped but by a Deny rule: before DNAT and before
 * connection tracking, what no policy decided goes on to the policies after).
 */
export type ListEnding = 'drop' | 'tiers' | 'return';

/**
 * The chain of the policies and profiles for `direction` of an endpoint (`pli-<hash>` ingress,
 * `plo-<hash>` egress, named by its rules): shared by every local endpoint with the same ones, so
 * that a pod joining its Deployment's pods on a node writes only its own short chains.
 */
export function policyListChain(
  plan: Pick<EndpointPlan, 'tiers' | 'profiles'>,
  direction: Direction,
  ending: ListEnding = 'drop',
  flowLogGroup?: number,
): Chain {
  // With flow logs on, the drops no rule decided are logged too, saying where they happened.
  const logged = (prefix: string) =>
    flowLogGroup === undefined ? noPolicyAllowed : [{ log: { prefix, group: flowLogGroup } }, ...noPolicyAllowed];
  const rules = direction === 'ingress' ? ingressListRules(plan, ending, logged) : egressListRules(plan, ending, logged);
  return regularChain(policyListChainName(direction, JSON.stringify(rules)), rules);
}

type Logged = (prefix: string) => Statement[];

/**
 * An egress list: an Allow returns with the accept mark (the destination's ingress runs after it).
 * One rule per policy: each is jumped to while no policy before it allowed or passed, and the
 * tier's end returns if one allowed. (A return after each policy doubled the rules of a list, most
 * of a node's rules at thousands of policies, and each costs the kernel at every write.)
 */
function egressListRules(plan: Pick<EndpointPlan, 'tiers' | 'profiles'>, ending: ListEnding, logged: Logged): Rule[] {
  const rules: Rule[] = [markClear(MARK.accept | MARK.pass)];
  plan.tiers.egress.forEach((tier, t) => {
    if (t > 0) rules.push(markClear(MARK.pass));
    tier.policies.forEach((policy, i) => {
      const undecided = t === 0 && i === 0 ? [] : [bitClear(MARK.accept | MARK.pass)];
      rules.push(rule(undecided, jump(policy.chain), tierComment(tier, policy)));
    });
    if (tier.policies.length > 0) rules.push(rule([bitSet(MARK.accept)], 'return'));
    if (!tier.passes && ending !== 'return')
      rules.push(rule([bitClear(MARK.pass)], 'drop', tierEndComment(tier), logged(tierEndFlowPrefix('egress', tier.name))));
  });
  const profiles = plan.profiles.filter((profile) => profile.egress !== undefined);
  profiles.forEach((profile, i) => {
    rules.push(rule(i === 0 ? [] : [bitClear(MARK.accept)], jump(profile.egress as string), profileComment(profile)));
  });
  if (profiles.length > 0) rules.push(rule([bitSet(MARK.accept)], 'return'));
  if (ending === 'drop') rules.push(rule([], 'drop', 'no policy or profile allowed', logged(listEndFlowPrefix('egress'))));
  return rules;
}

/**
 * An ingress list: an Allow accepts at once (rules.ts), so only a Pass needs the mark. A tier
 * clears its pass bit first and guards the jumps after a policy that can pass; a tier of
 * policies without Pass rules (every Kubernetes NetworkPolicy's) is one unguarded jump each.
 */
function ingressListRules(plan: Pick<EndpointPlan, 'tiers' | 'profiles'>, ending: ListEnding, logged: Logged): Rule[] {
  const rules: Rule[] = [];
  for (const tier of plan.tiers.ingress) {
    const passing = tier.policies.some((policy) => policy.canPass);
    if (passing) rules.push(markClear(MARK.pass));
    let guarded = false;
    for (const policy of tier.policies) {
      rules.push(rule(guarded ? [bitClear(MARK.pass)] : [], jump(policy.chain), tierComment(tier, policy)));
      guarded ||= policy.canPass;
    }
    if (!tier.passes && ending !== 'return')
      rules.push(rule(passing ? [bitClear(MARK.pass)] : [], 'drop', tierEndComment(tier), logged(tierEndFlowPrefix('ingress', tier.name))));
  }
  for (const profile of plan.profiles)
    if (profile.ingress !== undefined) rules.push(rule([], jump(profile.ingress), profileComment(profile)));
  if (ending === 'drop') rules.push(rule([], 'drop', 'no policy or profile allowed', logged(listEndFlowPrefix('ingress'))));
  return rules;
}

const tierComment = (tier: TierPlan, policy: TierPlan['policies'][number]) => `tier ${tier.name}: ${policy.display}`.slice(0, 127);
const tierEndComment = (tier: TierPlan) => `end of tier ${tier.name}`.slice(0, 127);
const profileComment = (profile: EndpointPlan['profiles'][number]) => `profile ${profile.display}`.slice(0, 127);

/**
 * The endpoint's chain for `direction` (`tw-<iface>` ingress, `fw-<iface>` egress): what is the
 * endpoint's own (its addresses), then its policy list (`list`, from policyListChain) by goto,
 * whose returns go where the endpoint chain's would.
 */
export function endpointChain(plan: EndpointPlan, direction: Direction, list: string): Chain {
  const rules: Rule[] = [];
  if (direction === 'egress') {
    const v4 = plan.addresses[4];
    rules.push(
      v4.length > 0
        ? rule(
            v4.map((a) => notMatch('ip saddr', a)),
            'drop',
            'anti-spoofing',
          )
        : rule([match('meta nfproto', 'ipv4')], 'drop', 'anti-spoofing: no IPv4 address'),
      rule(
        ['fe80::/10', '::', ...plan.addresses[6]].map((a) => notMatch('ip6 saddr', a)),
        'drop',
        'anti-spoofing',
      ),
    );
  }
  rules.push(
    rule([match('meta l4proto', 58)], jump(CHAINS.neighbourDiscovery)),
    rule([match('ct state', ['established', 'related'])], 'accept'),
    rule([match('ct state', 'invalid')], 'drop'),
    rule([], { goto: list }),
  );
  return regularChain(endpointChainName(plan.interfaceName, direction), rules);
}

/** The dispatch map elements of an endpoint. */
export function dispatchElements(interfaceName: string): { from: MapElement; to: MapElement } {
  return {
    from: { key: interfaceName, verdict: { goto: endpointChainName(interfaceName, 'egress') } },
    to: { key: interfaceName, verdict: { goto: endpointChainName(interfaceName, 'ingress') } },
  };
}
