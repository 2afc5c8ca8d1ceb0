// A small interpreter of netplug's nftables table descriptions (ts/nft/model.ts) for one synthetic
// packet: the base chains of a hook, verdict maps, jumps and gotos, named sets (prefixes, ranges,
// concatenations), marks and counters, as the kernel evaluates what the writer loads. A header
// field of a protocol the packet does not carry fails the match, whatever the operator (as the
// dependency nft inserts before it does). Reading a port of a packet without ports is reported as
// an error: the compiler must never write such a rule.
import type { Atom, Chain, Element, Match, MapVerdict, Rule, Selector, TablePart, Verdict } from '../../ts/nft/model.ts';
import { parseIp, parsePrefix } from '../../ts/net/cidr.ts';

export interface NftPacket {
  hook: 'forward' | 'input' | 'output';
  iifname?: string;
  oifname?: string;
  family: 4 | 6;
  saddr: string;
  daddr: string;
  /** IP protocol number. */
  l4proto: number;
  sport?: number;
  dport?: number;
  icmpType?: number;
  icmpCode?: number;
  ct?: 'new' | 'established' | 'related' | 'invalid' | 'untracked';
  mark?: number;
}

export interface Trace {
  verdict: 'accept' | 'drop';
  /** Chains entered, in order. */
  chains: string[];
  /** Prefixes of the log statements run. */
  logs: string[];
  /** Named counters incremented. */
  counters: string[];
  mark: number;
}

const PORTED = new Set([6, 17, 132, 136]);

export class InterpretError extends Error {}

/** The verdict of `part`'s base chains of the packet's hook (in priority order). */
export function interpret(part: TablePart, packet: NftPacket): Trace {
  const chains = new Map((part.chains ?? []).map((c) => [c.name, c]));
  const sets = new Map((part.sets ?? []).map((s) => [s.name, s]));
  const maps = new Map((part.maps ?? []).map((m) => [m.name, m]));
  const trace: Trace = { verdict: 'accept', chains: [], logs: [], counters: [], mark: packet.mark ?? 0 };
  const bases = (part.chains ?? [])
    .filter((c) => c.base?.hook === packet.hook)
    .sort((a, b) => (a.base?.priority ?? 0) - (b.base?.priority ?? 0));
  for (const base of bases) {
    const outcome = runBase(base);
    if (outcome === 'drop') {
      trace.verdict = 'drop';
      return trace;
    }
  }
  return trace;

  function runBase(base: Chain): 'accept' | 'drop' {
    // A stack of [chain, next rule index]; goto replaces the top, jump pushes.
    const stack: [Chain, number][] = [[base, 0]];
    trace.chains.push(base.name);
    let steps = 0;
    while (stack.length > 0) {
      if (++steps > 100_000) throw new InterpretError('the walk does not end (a loop of jumps)');
      const top = stack[stack.length - 1] as [Chain, number];
      const [chain, index] = top;
      const rule = chain.rules?.[index];
      if (!rule) {
        stack.pop();
        continue;
      }
      top[1] = index + 1;
      if (!(rule.matches ?? []).every((m) => matchHolds(m, rule))) continue;
      for (const statement of rule.statements ?? []) {
        if ('counter' in statement && statement.counter.name) trace.counters.push(statement.counter.name);
        if ('log' in statement) trace.logs.push(statement.log.prefix ?? '');
        if ('mark' in statement) {
          const change = statement.mark;
          trace.mark = 'or' in change ? (trace.mark | change.or) >>> 0 : (trace.mark & ~change.clear) >>> 0;
        }
        if ('reject' in statement) return 'drop';
      }
      if (rule.verdict === undefined) continue;
      const verdict = resolve(rule.verdict);
      if (verdict === undefined) continue;
      if (verdict === 'accept' || verdict === 'drop') return verdict;
      if (verdict === 'continue') continue;
      if (verdict === 'return') {
        stack.pop();
        continue;
      }
      const target = chains.get('jump' in verdict ? verdict.jump : verdict.goto);
      if (!target) throw new InterpretError(`chain "${'jump' in verdict ? verdict.jump : verdict.goto}" does not exist`);
      trace.chains.push(target.name);
      if ('goto' in verdict) stack.pop();
      stack.push([target, 0]);
    }
    return base.base?.policy ?? 'accept';
  }

  function resolve(verdict: Verdict): MapVerdict | undefined {
    if (typeof verdict === 'string' || 'jump' in verdict || 'goto' in verdict) return verdict;
    const map = maps.get(verdict.vmap.map);
    if (!map) throw new InterpretError(`map "${verdict.vmap.map}" does not exist`);
    const name = verdict.vmap.key === 'iifname' ? packet.iifname : packet.oifname;
    return map.elements?.find((e) => e.key === name)?.verdict;
  }

  function matchHolds(m: Match, rule: Rule): boolean {
    const keys = Array.isArray(m.key) ? m.key : [m.key];
    // A concatenation that carries the protocol reads the port's bytes whatever the packet (no
    // dependency guards it): with a protocol without ports, no element (each of a protocol with
    // ports) can match.
    const portless = keys.includes('meta l4proto') && !PORTED.has(packet.l4proto);
    const values = keys.map((key) => (portless && (key === 'th sport' || key === 'th dport') ? Number.NaN : field(key, rule)));
    if (values.some((v) => v === undefined)) return false; // the protocol dependency fails
    const negate = m.op === '!=';
    if (keys[0] === 'meta mark' && m.mask !== undefined) {
      const held = ((values[0] as number) & Number(m.mask)) >>> 0 === Number(m.value);
      return negate ? !held : held;
    }
    let held: boolean;
    if (typeof m.value === 'object' && !Array.isArray(m.value)) {
      const set = sets.get(m.value.set);
      if (!set) throw new InterpretError(`set "${m.value.set}" does not exist`);
      held = (set.elements ?? []).some((element) => elementHolds(keys, values, element));
    } else if (keys[0] === 'ct state') {
      const states = Array.isArray(m.value) ? m.value : [m.value];
      held = states.includes(values[0] as Atom);
    } else {
      const atoms = Array.isArray(m.value) ? m.value : [m.value];
      held = atoms.some((atom) => atomHolds(keys[0] as Selector, values[0] as string | number, atom));
    }
    return negate ? !held : held;
  }

  function elementHolds(keys: Selector[], values: (string | number | undefined)[], element: Element): boolean {
    const atoms = Array.isArray(element) ? element : [element];
    if (atoms.length !== keys.length) throw new InterpretError(`element ${JSON.stringify(element)} does not fit key ${keys.join(' . ')}`);
    return atoms.every((atom, i) => atomHolds(keys[i] as Selector, values[i] as string | number, atom));
  }

  function field(key: Selector, rule: Rule): string | number | undefined {
    const ip4 = packet.family === 4;
    switch (key) {
      case 'iifname':
        return packet.iifname ?? '';
      case 'oifname':
        return packet.oifname ?? '';
      case 'meta l4proto':
        return packet.l4proto;
      case 'meta nfproto':
        return ip4 ? 'ipv4' : 'ipv6';
      case 'meta mark':
        return trace.mark;
      case 'meta skuid':
        return undefined;
      case 'ip saddr':
        return ip4 ? packet.saddr : undefined;
      case 'ip daddr':
        return ip4 ? packet.daddr : undefined;
      case 'ip6 saddr':
        return ip4 ? undefined : packet.saddr;
      case 'ip6 daddr':
        return ip4 ? undefined : packet.daddr;
      case 'th sport':
      case 'th dport':
        if (!PORTED.has(packet.l4proto))
          throw new InterpretError(`rule ${JSON.stringify(rule)} reads a port of a protocol ${packet.l4proto} packet (no ports there)`);
        return key === 'th sport' ? packet.sport : packet.dport;
      case 'icmp type':
      case 'icmp code':
        if (!(ip4 && packet.l4proto === 1)) return undefined;
        return key === 'icmp type' ? packet.icmpType : packet.icmpCode;
      case 'icmpv6 type':
      case 'icmpv6 code':
        if (!(!ip4 && packet.l4proto === 58)) return undefined;
        return key === 'icmpv6 type' ? packet.icmpType : packet.icmpCode;
      case 'ct state':
        return packet.ct ?? 'new';
    }
  }
}

/** Whether a packet's field value is the atom: an address in a prefix or range, a port in a range, a name matching a wildcard. */
function atomHolds(key: Selector, value: string | number, atom: Atom): boolean {
  switch (key) {
    case 'ip saddr':
    case 'ip daddr':
    case 'ip6 saddr':
    case 'ip6 daddr':
      return addressIn(String(value), String(atom));
    case 'th sport':
    case 'th dport': {
      const text = String(atom);
      const dash = text.indexOf('-');
      if (dash < 0) return Number(value) === Number(atom);
      return Number(value) >= Number(text.slice(0, dash)) && Number(value) <= Number(text.slice(dash + 1));
    }
    case 'iifname':
    case 'oifname': {
      const text = String(atom);
      return text.endsWith('*') ? String(value).startsWith(text.slice(0, -1)) : value === text;
    }
    case 'meta l4proto': {
      const names: Record<string, number> = { tcp: 6, udp: 17, icmp: 1, icmpv6: 58, 'ipv6-icmp': 58, sctp: 132, udplite: 136 };
      return Number(value) === (typeof atom === 'number' ? atom : (names[atom] ?? Number(atom)));
    }
    default:
      return String(value) === String(atom);
  }
}

function addressIn(address: string, atom: string): boolean {
  const ip = parseIp(address);
  if (!ip) throw new InterpretError(`packet address ${address} is not an address`);
  const dash = atom.indexOf('-');
  if (dash > 0) {
    const [from, to] = [parseIp(atom.slice(0, dash)), parseIp(atom.slice(dash + 1))];
    if (!from || !to) throw new InterpretError(`range ${atom} is not a range of addresses`);
    return from.family === ip.family && ip.value >= from.value && ip.value <= to.value;
  }
  if (atom.includes('/')) {
    const prefix = parsePrefix(atom);
    if (!prefix) throw new InterpretError(`prefix ${atom} is not a prefix`);
    const width = BigInt(prefix.family === 4 ? 32 : 128);
    const host = width - BigInt(prefix.length);
    return prefix.family === ip.family && ip.value >> host === prefix.base >> host;
  }
  const other = parseIp(atom);
  if (!other) throw new InterpretError(`${atom} is not an address`);
  return other.family === ip.family && other.value === ip.value;
}
