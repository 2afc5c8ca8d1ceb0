// What a policy's rules decide for one packet, read from the same programs the compiler writes to
// nftables: explain's answer. Which addresses a selector stands for, and which named ports, is the
// caller's (the resolver); the rest is here.
import { covers, type Family, type NetList, type PortRange } from './addresses.ts';
import type { Direction, PolicyProgram, RuleProgram, SideProgram } from './program.ts';

/** One packet, as the rules compare it. */
export interface Packet {
  family: Family;
  source: bigint;
  destination: bigint;
  /** IP protocol number. */
  protocol: number;
  sourcePort?: number;
  destinationPort?: number;
  icmpType?: number;
  icmpCode?: number;
}

export interface Resolver {
  /** Whether `address` belongs to an endpoint or network set the (canonical) selector matches. */
  selected(selector: string, family: Family, address: bigint): boolean;
  /** Whether an endpoint the selector matches has `address` and a port named one of `names` that is `protocol`/`port`. */
  namedPort(selector: string, names: readonly string[], family: Family, address: bigint, protocol: number, port: number): boolean;
}

const PORT_PROTOCOLS = new Set([6, 17, 132, 136]);

const inPorts = (ranges: readonly PortRange[], port: number) => ranges.some((r) => port >= r.from && port <= r.to);
const inNets = (nets: NetList, family: Family, address: bigint) => covers(nets[family], address);

function sideMatches(side: SideProgram, end: 'source' | 'destination', packet: Packet, resolver: Resolver): boolean {
  const address = end === 'source' ? packet.source : packet.destination;
  const port = end === 'source' ? packet.sourcePort : packet.destinationPort;
  const { family } = packet;
  if (side.nets && !inNets(side.nets, family, address)) return false;
  if (side.notNets && inNets(side.notNets, family, address)) return false;
  if (side.selector !== undefined && !resolver.selected(side.selector, family, address)) return false;
  if (side.notSelector !== undefined && resolver.selected(side.notSelector, family, address)) return false;
  const hasPorts = port !== undefined && PORT_PROTOCOLS.has(packet.protocol);
  const named = (names: readonly string[]) =>
    hasPorts && resolver.namedPort(side.selector ?? 'all()', names, family, address, packet.protocol, port as number);
  if (side.notPorts && hasPorts && inPorts(side.notPorts, port as number)) return false;
  if (side.notNamedPorts && named(side.notNamedPorts)) return false;
  if (side.ports || side.namedPorts) {
    if (!hasPorts) return false;
    const numeric = side.ports !== undefined && inPorts(side.ports, port as number);
    if (!numeric && !(side.namedPorts && named(side.namedPorts))) return false;
  }
  return true;
}

/** Whether the rule matches the packet. */
function ruleMatches(rule: RuleProgram, packet: Packet, resolver: Resolver): boolean {
  if (rule.ipVersion !== undefined && rule.ipVersion !== packet.family) return false;
  if (rule.protocol !== undefined && rule.protocol !== packet.protocol) return false;
  if (rule.notProtocol !== undefined && rule.notProtocol === packet.protocol) return false;
  if (rule.icmp || rule.notICMP) {
    const icmp = packet.family === 4 ? 1 : 58;
    if (packet.protocol !== icmp || packet.icmpType === undefined) return false;
    if (rule.icmp?.type !== undefined && rule.icmp.type !== packet.icmpType) return false;
    if (rule.icmp?.code !== undefined && rule.icmp.code !== packet.icmpCode) return false;
    const not = rule.notICMP;
    if (not?.type !== undefined && not.type === packet.icmpType && (not.code === undefined || not.code === packet.icmpCode)) return false;
  }
  for (const side of [rule.source, rule.destination]) if (side.nets && side.nets[packet.family].length === 0) return false;
  return sideMatches(rule.source, 'source', packet, resolver) && sideMatches(rule.destination, 'destination', packet, resolver);
}

/** What a policy's rules in one direction did with a packet: the rule that decided, if any, and the Log rules met on the way. */
export function policyDecision(
  program: PolicyProgram,
  direction: Direction,
  packet: Packet,
  resolver: Resolver,
): { rule?: RuleProgram; logged: RuleProgram[] } {
  const logged: RuleProgram[] = [];
  for (const rule of program[direction] ?? []) {
    if (!ruleMatches(rule, packet, resolver)) continue;
    if (rule.action === 'Log') logged.push(rule);
    else return { rule, logged };
  }
  return { logged };
}
