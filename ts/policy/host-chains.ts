// The chains of host endpoints: the node's own interfaces under policy. They exist only while the
// node has a host endpoint, in base chains of their own, so a node without one pays nothing.
//
// - The host's own traffic (input, output): `fh-<iface>` / `th-<iface>`: established and related
//   accepted, invalid dropped, ICMPv6 neighbour discovery accepted, the failsafe ports accepted
//   (so a wrong policy cannot lock an administrator out), then the endpoint's policies and
//   profiles; a host endpoint with neither drops everything else.
// - Forwarded traffic (to and from local workloads, or between interfaces): `fhfw-` / `thfw-`,
//   only where applyOnForward policies select the endpoint in that direction (else allowed); no
//   profiles.
// - preDNAT policies (ingress only) in prerouting before kube-proxy's DNAT (`fhpd-`), doNotTrack
//   policies in the raw hooks (`fhnt-` / `thnt-`): what they allow goes on (preDNAT) or is
//   exempted from connection tracking and accepted by the filter hooks (doNotTrack); what they do
//   not decide goes on to the policies after; the failsafe ports are never dropped there either.
//
// Workload interfaces and loopback are never a host endpoint's: a workload's traffic to the host
// is its own egress, the host's to a workload is not policed, and loopback carries the node's own
// services. A host endpoint naming an interface takes precedence over one of all interfaces (`*`).
import { baseChain, jump, match, PRIORITY, regularChain, rule } from '../nft/build.ts';
import type { Chain, Rule } from '../nft/model.ts';
import { bitSet, markClear, POLICY_PRIORITY, policyListChain, type ListEnding, type TierPlan } from './chains.ts';
import { CHAINS, HOST_CHAINS, hostChainName, MARK, type HostChainKind } from './names.ts';
import type { Direction } from './program.ts';

/** A port the failsafe rules keep open: `tcp:22`. */
export interface FailsafePort {
  protocol: 'tcp' | 'udp';
  port: number;
}

/** Felix's defaults, with the kubelet's port: inbound by destination port, outbound likewise. */
export const DEFAULT_FAILSAFE = {
  inbound: 'tcp:22,udp:68,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667,tcp:10250',
  outbound: 'udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667,tcp:10250',
} as const;

/** `tcp:22,udp:68` → ports; `none` or empty → none. Throws naming the entry it cannot read. */
export function parseFailsafePorts(text: string): FailsafePort[] {
  const trimmed = text.trim();
  if (trimmed === '' || trimmed === 'none') return [];
  return trimmed.split(',').map((entry) => {
    const found = /^(tcp|udp):(\d{1,5})$/i.exec(entry.trim());
    const port = Number(found?.[2]);
    if (!found || port < 1 || port > 65535) throw new Error(`"${entry.trim()}" is not <tcp|udp>:<port 1-65535>`);
    return { protocol: (found[1] as string).toLowerCase() as FailsafePort['protocol'], port };
  });
}

export interface HostEndpointPlan {
  /** The interface, or `*` for every interface but workloads' and loopback. */
  interfaceName: string;
  /** Per chain kind and direction, the tiers with policies for it (preDNAT: ingress only). */
  tiers: Record<HostChainKind, Record<Direction, TierPlan[]>>;
  /** Its profiles' chains (the host's own traffic only). */
  profiles: { display: string; ingress?: string; egress?: string }[];
}

/** What one host endpoint adds: its chains (lists included) and whether it has each hook's. */
export interface BuiltHostEndpoint {
  interfaceName: string;
  chains: Chain[];
  /** Per chain kind and direction: whether the endpoint has a chain there to dispatch to. */
  dispatched: Record<HostChainKind, Record<Direction, boolean>>;
}

const ENDINGS: Record<HostChainKind, ListEnding> = { host: 'drop', forward: 'tiers', preDNAT: 'return', untracked: 'return' };

const established = [rule([match('ct state', ['established', 'related'])], 'accept'), rule([match('ct state', 'invalid')], 'drop')];

/** A host endpoint's chains; a kind and direction without policies (but the host's own) gets none. */
export function hostEndpointChains(plan: HostEndpointPlan, flowLogGroup?: number): BuiltHostEndpoint {
  const chains: Chain[] = [];
  const dispatched = {} as BuiltHostEndpoint['dispatched'];
  for (const kind of ['host', 'forward', 'preDNAT', 'untracked'] as const) {
    dispatched[kind] = { ingress: false, egress: false };
    for (const direction of ['ingress', 'egress'] as const) {
      const tiers = plan.tiers[kind][direction];
      if (kind !== 'host' && tiers.length === 0) continue;
      if (kind === 'preDNAT' && direction === 'egress') continue;
      const list = policyListChain(
        { tiers: { ingress: [], egress: [], [direction]: tiers }, profiles: kind === 'host' ? plan.profiles : [] },
        direction,
        ENDINGS[kind],
        flowLogGroup,
      );
      const failsafe = rule([], jump(direction === 'ingress' ? HOST_CHAINS.failsafeIn : HOST_CHAINS.failsafeOut));
      const head: Rule[] =
        kind === 'host'
          ? [...established, rule([match('meta l4proto', 58)], jump(CHAINS.neighbourDiscovery)), failsafe]
          : kind === 'forward'
            ? established
            : [failsafe];
      chains.push(regularChain(hostChainName(plan.interfaceName, kind, direction), [...head, rule([], { goto: list.name })]), list);
      dispatched[kind][direction] = true;
    }
  }
  return { interfaceName: plan.interfaceName, chains, dispatched };
}

/** The rules sending a packet to its host endpoint's chain of `kind` (by goto); workloads and loopback return. */
function dispatchRules(endpoints: readonly BuiltHostEndpoint[], kind: HostChainKind, direction: Direction, workloads: string): Rule[] {
  const key = direction === 'ingress' ? 'iifname' : 'oifname';
  const rules = [rule([match(key, 'lo')], 'return'), rule([match(key, workloads)], 'return')];
  const named = endpoints.filter((e) => e.interfaceName !== '*');
  const all = endpoints.find((e) => e.interfaceName === '*');
  for (const e of named) {
    // A named endpoint without a chain here still stands for its interface: the `*` one is not its.
    if (!e.dispatched[kind][direction]) rules.push(rule([match(key, e.interfaceName)], 'return'));
    else rules.push(rule([match(key, e.interfaceName)], { goto: hostChainName(e.interfaceName, kind, direction) }));
  }
  if (all?.dispatched[kind][direction]) rules.push(rule([], { goto: hostChainName('*', kind, direction) }));
  return rules;
}

function failsafeChain(name: string, ports: readonly FailsafePort[]): Chain {
  const rules: Rule[] = [];
  for (const [protocol, number] of [
    ['tcp', 6],
    ['udp', 17],
  ] as const) {
    const list = ports.filter((p) => p.protocol === protocol).map((p) => p.port);
    if (list.length > 0) rules.push(rule([match('meta l4proto', number), match('th dport', list)], 'accept', 'failsafe'));
  }
  return regularChain(name, rules);
}

const untrackedAccept: Rule = rule([bitSet(MARK.untracked)], 'accept', 'allowed before connection tracking');

/**
 * The base and dispatch chains of the node's host endpoints (one of each hook that some endpoint
 * has a chain at), and the failsafe chains; none when there is no host endpoint.
 */
export function hostBaseChains(
  endpoints: readonly BuiltHostEndpoint[],
  failsafe: { inbound: readonly FailsafePort[]; outbound: readonly FailsafePort[] },
  interfacePrefix: string,
): Chain[] {
  if (endpoints.length === 0) return [];
  const workloads = `${interfacePrefix}*`;
  const has = (kind: HostChainKind, direction: Direction) => endpoints.some((e) => e.dispatched[kind][direction]);
  const filter = (hook: 'input' | 'output' | 'forward') => ({ type: 'filter' as const, hook, priority: POLICY_PRIORITY + 1 });
  const chains: Chain[] = [
    failsafeChain(HOST_CHAINS.failsafeIn, failsafe.inbound),
    failsafeChain(HOST_CHAINS.failsafeOut, failsafe.outbound),
    baseChain(HOST_CHAINS.input, filter('input'), [untrackedAccept, ...dispatchRules(endpoints, 'host', 'ingress', workloads)]),
    baseChain(HOST_CHAINS.output, filter('output'), [untrackedAccept, ...dispatchRules(endpoints, 'host', 'egress', workloads)]),
  ];
  if (has('forward', 'ingress') || has('forward', 'egress')) {
    chains.push(
      // Workloads' own chains (filter-forward, before this one) police untracked packets too.
      // Egress first: an ingress Allow accepts, ending the chain.
      baseChain(HOST_CHAINS.forward, filter('forward'), [
        untrackedAccept,
        rule([], jump(HOST_CHAINS.toForward), 'forwarded out through a host endpoint'),
        rule([], jump(HOST_CHAINS.fromForward), 'forwarded in through a host endpoint'),
      ]),
      regularChain(HOST_CHAINS.fromForward, dispatchRules(endpoints, 'forward', 'ingress', workloads)),
      regularChain(HOST_CHAINS.toForward, dispatchRules(endpoints, 'forward', 'egress', workloads)),
    );
  }
  if (has('preDNAT', 'ingress')) {
    chains.push(
      baseChain(HOST_CHAINS.preDnat, { type: 'filter', hook: 'prerouting', priority: PRIORITY.mangle }, [
        ...established.slice(0, 1),
        ...dispatchRules(endpoints, 'preDNAT', 'ingress', workloads),
      ]),
    );
  }
  for (const [direction, base, dispatch, hook] of [
    ['ingress', HOST_CHAINS.rawPrerouting, HOST_CHAINS.untrackedIn, 'prerouting'],
    ['egress', HOST_CHAINS.rawOutput, HOST_CHAINS.untrackedOut, 'output'],
  ] as const) {
    if (!has('untracked', direction)) continue;
    chains.push(
      // A doNotTrack Allow marks the packet untracked, exempts it from tracking and accepts (rules.ts).
      baseChain(base, { type: 'filter', hook, priority: PRIORITY.raw }, [
        markClear(MARK.accept | MARK.pass | MARK.untracked),
        rule([], jump(dispatch)),
      ]),
      regularChain(dispatch, dispatchRules(endpoints, 'untracked', direction, workloads)),
    );
  }
  return chains;
}
