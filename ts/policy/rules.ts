// A policy's rules as nftables rules of its chain (`pi-`/`po-`): per rule and per address family
// it needs, the matches of both ends, then its action. Peers (selectors), address lists of more
// than one element, port lists and named ports are looked up in named sets shared by every rule
// that names the same ones (anonymous sets cost the kernel a walk of the transaction each, and
// thousands of them take seconds to load); one address or port range is compared inline.
import { match, notMatch, rule } from '../nft/build.ts';
import type { Atom, Match, Rule, Selector as NftSelector, Statement } from '../nft/model.ts';
import { intervalText, portText, type Family, type PortRange } from './addresses.ts';
import { denyCounterName, hashOf, MARK } from './names.ts';
import { fitted } from './fitted.ts';
import { flowMark, type FlowDecisions } from './flow-decisions.ts';
import { ruleFlowPrefix } from './flow-prefix.ts';
import { keeper } from './memo.ts';
import type { Direction, PolicyProgram, RuleProgram, SideProgram } from './program.ts';

/** A named set a rule looks up; its name is a hash of what it holds (static sets) or stands for. */
export type SetDescriptor =
  /** The addresses of the endpoints and network sets a selector matches. */
  | { kind: 'selector'; family: Family; selector: string }
  /** A fixed list of address intervals. */
  | { kind: 'nets'; family: Family; elements: string[] }
  /** A fixed list of port ranges. */
  | { kind: 'ports'; elements: (number | string)[] }
  /**
   * `address . protocol . port` of the named ports of the endpoints a selector matches, and of
   * `ports` at each of their addresses; `local`: of the endpoints on this node only.
   */
  | { kind: 'named-ports'; family: Family; selector: string; names: string[]; protocol?: number; ports?: number[]; local?: true };

export function setName(set: SetDescriptor): string {
  switch (set.kind) {
    case 'selector':
      return `sel${set.family}-${hashOf(set.selector)}`;
    case 'nets':
      return `net${set.family}-${hashOf(set.elements.join(','))}`;
    case 'ports':
      return `port-${hashOf(set.elements.join(','))}`;
    case 'named-ports':
      return `np${set.family}-${hashOf(`${set.protocol ?? '*'}|${set.names.join(',')}|${set.selector}${set.ports ? `|${set.ports.join(',')}` : ''}${set.local ? '|local' : ''}`)}`;
  }
}

/** Gives the name of the set a rule uses, so the caller can keep it (and count its users). */
export type UseSet = (set: SetDescriptor) => string;

export interface RuleOptions {
  families: readonly Family[];
  /** NFLOG group of Log rules. */
  logGroup: number;
  /** Log rules log at most this many packets per second (with a burst of as many). */
  logPerSecond: number;
  /** With flow logs on, the NFLOG group every Deny rule also logs the packet to (flow-prefix.ts). */
  flowLogGroup?: number;
  /** With flow logs on, the numbers Allow rules write into the connection's mark (flow-decisions.ts). */
  flowDecisions?: FlowDecisions;
}

/**
 * Matches and statements are shared by every rule that has the same one (they are never changed
 * once made): at thousands of policies the rules' own small objects were most of the compiler's
 * heap, and most of the garbage collector's work in a full compile.
 */
const sharedMatches = keeper(50_000);
const sharedStatements = keeper(50_000);

/** `key value` (or `key != value`), shared. */
function sharedMatch(key: NftSelector | NftSelector[], value: Atom | { set: string }, negated = false): Match {
  const text = typeof value === 'object' ? `@${value.set}` : `${typeof value}:${value}`;
  return sharedMatches<Match>(`${negated ? '!' : ''}${String(key)} ${text}`, () => (negated ? notMatch(key, value) : match(key, value)));
}

const setMatch = (key: NftSelector | NftSelector[], set: string, negated = false) => sharedMatch(key, { set }, negated);

/** At most this many `!=` comparisons inline for a notNets or notPorts list; more go to a set. */
const INLINE_NEGATIONS = 3;

/** The rules of `program`'s chain for `direction` (empty when it has none there). */
export function policyRules(program: PolicyProgram, direction: Direction, options: RuleOptions, useSet: UseSet): Rule[] {
  const out: Rule[] = [];
  for (const ruleProgram of program[direction] ?? []) out.push(...nftRules(program, direction, ruleProgram, options, useSet));
  return fitted(out);
}

/** The families a rule can match packets of; `specific` when its matches name one. */
function ruleFamilies(r: RuleProgram, families: readonly Family[]): { families: Family[]; specific: boolean } {
  let out = [...families];
  if (r.ipVersion !== undefined) out = out.filter((f) => f === r.ipVersion);
  if (r.icmp || r.notICMP) out = out.filter((f) => f === (r.protocol === 1 ? 4 : 6));
  for (const side of [r.source, r.destination])
    if (side.nets) out = out.filter((f) => (side.nets as { 4: unknown[]; 6: unknown[] })[f].length > 0);
  const addressed = (side: SideProgram) =>
    side.nets !== undefined ||
    side.notNets !== undefined ||
    side.selector !== undefined ||
    side.notSelector !== undefined ||
    side.namedPorts !== undefined ||
    side.notNamedPorts !== undefined;
  const specific =
    r.ipVersion !== undefined || r.icmp !== undefined || r.notICMP !== undefined || addressed(r.source) || addressed(r.destination);
  return { families: out, specific };
}

function nftRules(program: PolicyProgram, direction: Direction, r: RuleProgram, options: RuleOptions, useSet: UseSet): Rule[] {
  const { families, specific } = ruleFamilies(r, options.families);
  const comment = commentOf(program, direction, r.index);
  const action = actionOf(program, direction, r, options);
  const out: Rule[] = [];
  for (const family of specific ? families : [undefined]) {
    const common: Match[] = [];
    if (r.protocol !== undefined) common.push(sharedMatch('meta l4proto', r.protocol));
    if (r.notProtocol !== undefined) common.push(sharedMatch('meta l4proto', r.notProtocol, true));
    // A named-port lookup's elements carry the rule's protocol: its own comparison would repeat it.
    const withoutProtocol = common.filter((m) => m.op === '!=');
    const sources = sideMatches(r.source, 'source', family, r.protocol, useSet);
    const destinations = sideMatches(r.destination, 'destination', family, r.protocol, useSet, policedBy(program, direction));
    for (const icmp of icmpMatches(r, family)) {
      for (const source of sources) {
        for (const destination of destinations) {
          // concat, not a spread and unshift: its array is as long as it holds, where the others
          // leave room to grow, which tens of thousands of rules kept (megabytes).
          const given = (r.protocol !== undefined && carriesProtocol(source, destination) ? withoutProtocol : common).concat(
            source,
            destination,
            icmp,
          );
          const matches =
            family !== undefined && !given.some((m) => FAMILY_SELECTORS.has(firstKey(m)))
              ? [sharedMatch('meta nfproto', family === 4 ? 'ipv4' : 'ipv6')].concat(given)
              : given;
          out.push(rule(matches, action.verdict, comment, action.statements));
        }
      }
    }
  }
  return out;
}

/**
 * Whether the ends' matches look `address . protocol . port` up in a named-ports set (whose
 * elements are of the rule's protocol) and read no port outside such a lookup, which only a packet
 * of that protocol can match.
 */
function carriesProtocol(source: Match[], destination: Match[]): boolean {
  const matches = source.concat(destination);
  const looksUp = matches.some((m) => m.op !== '!=' && Array.isArray(m.key) && m.key.includes('meta l4proto'));
  return looksUp && !matches.some((m) => m.key === 'th sport' || m.key === 'th dport');
}

const FAMILY_SELECTORS = new Set<NftSelector>(['ip saddr', 'ip daddr', 'ip6 saddr', 'ip6 daddr', 'icmp type', 'icmpv6 type']);
const firstKey = (m: Match): NftSelector => (Array.isArray(m.key) ? (m.key[0] as NftSelector) : m.key);

/** `netplug <policy> <direction> rule <n>`: shown by `nft list`, and the log prefix of Log rules. */
function commentOf(program: PolicyProgram, direction: Direction, index: number): string {
  const text = `${program.kind === 'Profile' ? 'profile ' : ''}${program.display} ${direction} rule ${index}`;
  return text.length <= 100 ? text : `${text.slice(0, 80)}~${hashOf(program.key)}`;
}

function actionOf(
  program: PolicyProgram,
  direction: Direction,
  r: RuleProgram,
  options: RuleOptions,
): { verdict?: Rule['verdict']; statements: Statement[] } {
  const { flowLogGroup: group, flowDecisions } = options;
  // The flow log's statement first: the verdict's statements are shared by every rule with them.
  const denyLogged = (statements: Statement[]): Statement[] => {
    if (group === undefined) return statements;
    const prefix = ruleFlowPrefix('Deny', direction, hashOf(program.key), r.index);
    return sharedStatements<Statement[]>(`${prefix} ${group} ${JSON.stringify(statements)}`, () => [
      { log: { prefix, group } },
      ...statements,
    ]);
  };
  // An allowed connection's flow log is its mark: no packet leaves the kernel for it.
  const allowMarked = (statements: Statement[]): Statement[] => {
    if (!flowDecisions) return statements;
    const ctMark = flowMark(direction, flowDecisions.numberOf(direction, hashOf(program.key), r.index));
    return sharedStatements<Statement[]>(`ct ${ctMark.clear} ${ctMark.or} ${JSON.stringify(statements)}`, () => [
      { ctMark },
      ...statements,
    ]);
  };
  switch (r.action) {
    case 'Allow':
      // Ingress is the last word on a packet wherever it is policed (after the source's egress in
      // forward), so its Allow accepts at once; an egress Allow returns with the accept mark, so the
      // destination's ingress still runs. A doNotTrack Allow (raw hooks, nothing after it) also
      // exempts the packet from connection tracking and marks it for the filter hooks to accept.
      if (program.doNotTrack)
        return {
          verdict: 'accept',
          statements: allowMarked(sharedStatements<Statement[]>('untracked', () => [{ mark: { or: MARK.untracked } }, { notrack: {} }])),
        };
      if (direction === 'ingress') return { verdict: 'accept', statements: allowMarked([]) };
      return {
        verdict: 'return',
        statements: allowMarked(sharedStatements<Statement[]>('allow', () => [{ mark: { or: MARK.accept } }])),
      };
    case 'Pass':
      return { verdict: 'return', statements: sharedStatements<Statement[]>('pass', () => [{ mark: { or: MARK.pass } }]) };
    case 'Deny': {
      const counter = denyCounterName(program.key);
      return {
        verdict: 'drop',
        statements: denyLogged(sharedStatements<Statement[]>(`deny ${counter}`, () => [{ counter: { name: counter } }])),
      };
    }
    case 'Log':
      return {
        statements: [
          { limit: { rate: options.logPerSecond, per: 'second', burst: options.logPerSecond } },
          { log: { prefix: `netplug ${commentOf(program, direction, r.index)}`.slice(0, 127), group: options.logGroup } },
        ],
      };
  }
}

type Field = { address: NftSelector; port: NftSelector };

function fields(end: 'source' | 'destination', family: Family | undefined): Field {
  const s = end === 'source';
  const address = (family === 6 ? (s ? 'ip6 saddr' : 'ip6 daddr') : s ? 'ip saddr' : 'ip daddr') as NftSelector;
  return { address, port: s ? 'th sport' : 'th dport' };
}

/**
 * The selector of the endpoints whose address a packet's destination always is where `program`'s
 * `direction` chain sees it: a namespaced policy selects pods only, and its ingress chain is reached
 * for the local pods it selects, on their way in.
 */
function policedBy(program: PolicyProgram, direction: Direction): string | undefined {
  return program.kind === 'NetworkPolicy' && direction === 'ingress' ? program.selectsText : undefined;
}

/**
 * The alternatives one end of a rule stands for (any of them matches), each a list of matches (all
 * must hold). `policed`: the selector of the local endpoints this end's address is always one of.
 */
function sideMatches(
  side: SideProgram,
  end: 'source' | 'destination',
  family: Family | undefined,
  protocol: number | undefined,
  useSet: UseSet,
  policed?: string,
): Match[][] {
  const { address, port } = fields(end, family);
  const all: Match[] = [];
  if (family !== undefined) {
    if (side.nets) {
      const elements = side.nets[family].map((interval) => intervalText(family, interval));
      all.push(
        elements.length === 1 ? sharedMatch(address, elements[0] as string) : setMatch(address, useSet({ kind: 'nets', family, elements })),
      );
    }
    if (side.notNets) {
      const elements = side.notNets[family].map((interval) => intervalText(family, interval));
      if (elements.length <= INLINE_NEGATIONS) for (const element of elements) all.push(sharedMatch(address, element, true));
      else all.push(setMatch(address, useSet({ kind: 'nets', family, elements }), true));
    }
    if (side.selector !== undefined) all.push(setMatch(address, useSet({ kind: 'selector', family, selector: side.selector })));
    if (side.notSelector !== undefined) all.push(setMatch(address, useSet({ kind: 'selector', family, selector: side.notSelector }), true));
    if (side.notNamedPorts) {
      const set = useSet(namedPorts(side, side.notNamedPorts, family, protocol));
      all.push(setMatch([address, 'meta l4proto', port], set, true));
    }
  }
  if (side.notPorts) {
    const elements = side.notPorts.map(portText);
    if (elements.length <= INLINE_NEGATIONS) for (const element of elements) all.push(sharedMatch(port, element, true));
    else all.push(setMatch(port, useSet({ kind: 'ports', elements }), true));
  }
  if (!side.ports && !side.namedPorts) return [all];
  const named = (set: SetDescriptor) => [...all, setMatch([address, 'meta l4proto', port], useSet(set))];
  if (side.namedPorts && family !== undefined && policed !== undefined && side.selector === undefined) {
    // The address is one of the policed pods': their named ports, and the numeric ports at their
    // addresses, in one lookup where a rule for each would be (half the rules of a Kubernetes
    // policy naming both kinds); only this node's pods, the only ones such a packet goes to.
    const own = { kind: 'named-ports', family, selector: policed, names: side.namedPorts, local: true } as const;
    const singles = side.ports?.every((range) => range.from === range.to) ? side.ports.map((range) => range.from) : undefined;
    if (protocol !== undefined && (!side.ports || singles)) return [named({ ...own, protocol, ...(singles ? { ports: singles } : {}) })];
    const alternatives = [named({ ...own, ...(protocol !== undefined ? { protocol } : {}) })];
    if (side.ports) alternatives.unshift([...all, portMatch(port, side.ports, useSet)]);
    return alternatives;
  }
  const alternatives: Match[][] = [];
  if (side.ports) alternatives.push([...all, portMatch(port, side.ports, useSet)]);
  if (side.namedPorts && family !== undefined) alternatives.push(named(namedPorts(side, side.namedPorts, family, protocol)));
  return alternatives;
}

function portMatch(port: NftSelector, ranges: PortRange[], useSet: UseSet): Match {
  const elements = ranges.map(portText);
  return elements.length === 1 ? sharedMatch(port, elements[0] as Atom) : setMatch(port, useSet({ kind: 'ports', elements }));
}

/** The named ports of the endpoints at this end (every endpoint when it names none), of the rule's protocol. */
function namedPorts(side: SideProgram, names: string[], family: Family, protocol: number | undefined): SetDescriptor {
  return { kind: 'named-ports', family, selector: side.selector ?? 'all()', names, ...(protocol !== undefined ? { protocol } : {}) };
}

/** icmp / notICMP as alternatives: "not type T code C" is "not type T, or type T and not code C". */
function icmpMatches(r: RuleProgram, family: Family | undefined): Match[][] {
  const type = (family === 6 ? 'icmpv6 type' : 'icmp type') as NftSelector;
  const code = (family === 6 ? 'icmpv6 code' : 'icmp code') as NftSelector;
  const positive: Match[] = [];
  if (r.icmp?.type !== undefined) positive.push(match(type, r.icmp.type));
  if (r.icmp?.code !== undefined) positive.push(match(code, r.icmp.code));
  const not = r.notICMP;
  if (not?.type === undefined) return [positive];
  if (not.code === undefined) return [[...positive, notMatch(type, not.type)]];
  return [
    [...positive, notMatch(type, not.type)],
    [...positive, match(type, not.type), notMatch(code, not.code)],
  ];
}
