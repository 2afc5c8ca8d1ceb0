// A policy (or profile) as the compiler and explain read it: which endpoints it applies to, where
// it stands (tier, order), and per direction its rules with every field reduced to what a packet
// is compared with: address intervals per family, one canonical selector per rule end, port
// ranges and port names. A rule that cannot be reduced is left out and reported; the rest stays.
import {
  DEFAULT_TIER,
  resourceName,
  type Action,
  type EntityRule,
  type IcmpMatch,
  type NetworkPolicyResource,
  type PolicyRule,
  type ProfileResource,
} from '../model/policy.ts';
import { parsePort, protocolNumber } from '../model/policy-schema.ts';
import { typesOf } from '../model/policy-check.ts';
import { parseSelector } from '../selectors/parse.ts';
import type { Selector } from '../selectors/syntax.ts';
import { mergedPorts, netList, type NetList, type PortRange } from './addresses.ts';
import { fitted } from './fitted.ts';
import { memoized } from './memo.ts';
import { canonical, entitySelector, policySelector } from './selectors.ts';

export type Direction = 'ingress' | 'egress';
export const DIRECTIONS: readonly Direction[] = ['ingress', 'egress'];

/** One end of a rule, reduced. Absent fields constrain nothing. */
export interface SideProgram {
  /** The addresses it must be in (per family; a family without any cannot match). */
  nets?: NetList;
  /** The addresses it must not be in. */
  notNets?: NetList;
  /** The canonical selector of the endpoints and network sets whose addresses it must be among. */
  selector?: string;
  notSelector?: string;
  /** Ports: the port must be in `ports` or be one of `namedPorts` of the endpoint at this end. */
  ports?: PortRange[];
  namedPorts?: string[];
  notPorts?: PortRange[];
  notNamedPorts?: string[];
}

export interface RuleProgram {
  /** The rule's place in its policy's list (from 0), for messages, log prefixes and explain. */
  index: number;
  action: Action;
  ipVersion?: 4 | 6;
  protocol?: number;
  notProtocol?: number;
  icmp?: IcmpMatch;
  notICMP?: IcmpMatch;
  source: SideProgram;
  destination: SideProgram;
}

export interface PolicyProgram {
  /** `NetworkPolicy/<ns>/<name>`, `GlobalNetworkPolicy/<name>`, `Profile/<name>`: unique. */
  key: string;
  kind: 'NetworkPolicy' | 'GlobalNetworkPolicy' | 'Profile';
  /** `<ns>/<name>` or `<name>`: how people name it, and the tie-break of the order. */
  display: string;
  namespace?: string;
  tier: string;
  /** Absent: after every policy of the tier with an order. */
  order?: number;
  /** Which endpoints it applies to (profiles: those that name it). */
  selects: Selector;
  selectsText: string;
  /** Per direction it applies in, its rules; absent when it does not apply in that direction. */
  ingress?: RuleProgram[];
  egress?: RuleProgram[];
  /** GlobalNetworkPolicy's host endpoint flags, when set (see HOOKS). */
  applyOnForward?: true;
  preDNAT?: true;
  doNotTrack?: true;
}

/**
 * Where a policy's rules are evaluated: `endpoint` (a workload's traffic, or the traffic of a host
 * endpoint's own processes), `forward` (traffic forwarded through a host endpoint's interface),
 * `preDNAT` (a host endpoint's ingress before kube-proxy's DNAT), `untracked` (a host endpoint's
 * traffic before connection tracking).
 */
export type PolicyHook = 'endpoint' | 'forward' | 'preDNAT' | 'untracked';

/** Whether the policy has a Pass rule in `direction` (its list then guards the policies after it). */
export function canPass(program: PolicyProgram, direction: Direction): boolean {
  return (program[direction] ?? []).some((r) => r.action === 'Pass');
}

/** Whether the policy's rules are evaluated at `hook`: preDNAT and doNotTrack policies are at their hook only. */
export function appliesAt(program: PolicyProgram, hook: PolicyHook): boolean {
  if (program.preDNAT) return hook === 'preDNAT';
  if (program.doNotTrack) return hook === 'untracked';
  return hook === 'endpoint' || (hook === 'forward' && program.applyOnForward === true);
}

/** A field that could not be programmed: the policy's other rules still are. */
export interface ProgramIssue {
  /** `spec.ingress[2].source.selector` */
  field: string;
  message: string;
}

export const policyKey = (kind: string, name: string, namespace?: string): string =>
  namespace === undefined ? `${kind}/${name}` : `${kind}/${namespace}/${name}`;

/** The program of a checked policy; a rule it cannot use is left out and reported in `issues`. */
export function policyProgram(policy: NetworkPolicyResource, issues: ProgramIssue[] = []): PolicyProgram {
  const { spec } = policy;
  const namespace = policy.kind === 'NetworkPolicy' ? (policy.metadata.namespace ?? 'default') : undefined;
  const selects = policySelectorOf(
    JSON.stringify([namespace ?? null, spec.selector ?? null, spec.namespaceSelector ?? null, spec.serviceAccountSelector ?? null]),
  );
  const types = typesOf(spec);
  return {
    key: policyKey(policy.kind, policy.metadata.name, namespace),
    kind: policy.kind,
    display: resourceName({ metadata: { name: policy.metadata.name, ...(namespace ? { namespace } : {}) } }),
    ...(namespace !== undefined ? { namespace } : {}),
    tier: spec.tier ?? DEFAULT_TIER,
    ...(spec.order !== undefined ? { order: spec.order } : {}),
    selects: selects.selector,
    selectsText: selects.text,
    ...(types.includes('Ingress') ? { ingress: rules(spec.ingress ?? [], 'spec.ingress', namespace, issues) } : {}),
    ...(types.includes('Egress') ? { egress: rules(spec.egress ?? [], 'spec.egress', namespace, issues) } : {}),
    ...(spec.applyOnForward === true ? { applyOnForward: true } : {}),
    ...(spec.preDNAT === true ? { preDNAT: true } : {}),
    ...(spec.doNotTrack === true ? { doNotTrack: true } : {}),
  };
}

/** A profile's program: it applies to the endpoints that name it, in both directions, after every tier. */
export function profileProgram(profile: ProfileResource, issues: ProgramIssue[] = []): PolicyProgram {
  const name = profile.metadata.name;
  return {
    key: policyKey('Profile', name),
    kind: 'Profile',
    display: name,
    tier: '',
    selects: { kind: 'all' },
    selectsText: 'all()',
    ingress: rules(profile.spec.ingress ?? [], 'spec.ingress', undefined, issues),
    egress: rules(profile.spec.egress ?? [], 'spec.egress', undefined, issues),
  };
}

function rules(list: readonly PolicyRule[], field: string, namespace: string | undefined, issues: ProgramIssue[]): RuleProgram[] {
  const out: RuleProgram[] = [];
  list.forEach((rule, index) => {
    try {
      out.push(ruleProgram(rule, index, namespace));
    } catch (err) {
      issues.push({ field: `${field}[${index}]`, message: `left out: ${(err as Error).message}` });
    }
  });
  return fitted(out);
}

function ruleProgram(rule: PolicyRule, index: number, namespace: string | undefined): RuleProgram {
  const number = (p: PolicyRule['protocol']) => (p === undefined ? undefined : protocolNumber(p));
  const protocol = number(rule.protocol);
  const notProtocol = number(rule.notProtocol);
  return {
    index,
    action: rule.action,
    ...(rule.ipVersion !== undefined ? { ipVersion: rule.ipVersion } : {}),
    ...(protocol !== undefined ? { protocol } : {}),
    ...(notProtocol !== undefined ? { notProtocol } : {}),
    ...(rule.icmp ? { icmp: rule.icmp } : {}),
    ...(rule.notICMP ? { notICMP: rule.notICMP } : {}),
    source: side(rule.source ?? {}, namespace),
    destination: side(rule.destination ?? {}, namespace),
  };
}

function side(entity: EntityRule, namespace: string | undefined): SideProgram {
  const out: SideProgram = {};
  if (entity.nets !== undefined) out.nets = netList(entity.nets);
  if (entity.notNets !== undefined && entity.notNets.length > 0) out.notNets = netList(entity.notNets);
  const selector = entitySelectorText(
    JSON.stringify([
      namespace ?? null,
      entity.selector ?? null,
      entity.namespaceSelector ?? null,
      entity.serviceAccounts ?? null,
      entity.notSelector !== undefined,
    ]),
  );
  if (selector !== undefined) out.selector = selector;
  if (entity.notSelector !== undefined) out.notSelector = notSelectorText(entity.notSelector);
  const [ports, named] = portsOf(entity.ports);
  if (ports.length > 0 || named.length > 0) {
    if (ports.length > 0) out.ports = ports;
    if (named.length > 0) out.namedPorts = named;
  }
  const [notPorts, notNamed] = portsOf(entity.notPorts);
  if (notPorts.length > 0) out.notPorts = notPorts;
  if (notNamed.length > 0) out.notNamedPorts = notNamed;
  return out;
}

/** A notSelector excludes what it matches in any namespace (the positive selector carries the scope). */
const notSelectorText = memoized((text) => canonical(parseSelector(text)).text);

/** The canonical selector of the endpoints a policy applies to, by the JSON of the fields it reads (policySelector). */
const policySelectorOf = memoized((key) => {
  const [namespace, selector, namespaceSelector, serviceAccountSelector] = JSON.parse(key) as (string | null)[];
  const spec = {
    ...(selector !== null ? { selector } : {}),
    ...(namespaceSelector !== null ? { namespaceSelector } : {}),
    ...(serviceAccountSelector !== null ? { serviceAccountSelector } : {}),
  };
  return canonical(policySelector(spec, namespace ?? undefined));
});

/** The canonical text of a rule end's selector (entitySelector), by the JSON of the fields it reads. */
const entitySelectorText = memoized((key) => {
  const [namespace, selector, namespaceSelector, serviceAccounts, notSelector] = JSON.parse(key) as [
    string | null,
    string | null,
    string | null,
    EntityRule['serviceAccounts'] | null,
    boolean,
  ];
  const entity: EntityRule = {
    ...(selector !== null ? { selector } : {}),
    ...(namespaceSelector !== null ? { namespaceSelector } : {}),
    ...(serviceAccounts !== null ? { serviceAccounts } : {}),
    ...(notSelector ? { notSelector: 'all()' } : {}),
  };
  const found = entitySelector(entity, namespace ?? undefined);
  return found === undefined ? undefined : canonical(found).text;
});

function portsOf(list: readonly (number | string)[] | undefined): [PortRange[], string[]] {
  const ranges: PortRange[] = [];
  const names = new Set<string>();
  for (const port of list ?? []) {
    const parsed = parsePort(port);
    if (!parsed) throw new Error(`port ${JSON.stringify(port)} is not a port, a range or a port name`);
    if ('name' in parsed) names.add(parsed.name);
    else ranges.push({ from: parsed.from, to: parsed.to });
  }
  return [fitted(mergedPorts(ranges)), fitted([...names].sort())];
}
