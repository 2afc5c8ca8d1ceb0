// The NFLOG prefix of a rule's flow log: with flow logs on, every rule that decides a new flow
// (a policy's or profile's Allow or Deny rule, the drop at the end of a tier, the drop after the
// profiles) also logs the packet to the flow-log group with a prefix saying what decided it. The
// prefix names a policy by its key's hash (names.ts hashOf), short enough for any name; the
// engine maps the hash back to the policy.
import type { Direction } from './program.ts';

export type FlowAction = 'Allow' | 'Deny';

/** What a flow-log prefix says. */
export type FlowDecision =
  | { action: FlowAction; direction: Direction; policyHash: string; rule: number }
  | { action: 'Deny'; direction: Direction; tier: string }
  | { action: 'Deny'; direction: Direction; end: true };

const ACTION = { Allow: 'A', Deny: 'D' } as const;
const DIRECTION = { ingress: 'i', egress: 'e' } as const;

/** `nf A i <hash> <rule>`: a policy's rule. */
export const ruleFlowPrefix = (action: FlowAction, direction: Direction, policyHash: string, rule: number): string =>
  `nf ${ACTION[action]} ${DIRECTION[direction]} ${policyHash} ${rule}`;

/** `nf D i tier <name>`: no policy of the tier allowed. */
export const tierEndFlowPrefix = (direction: Direction, tier: string): string => `nf D ${DIRECTION[direction]} tier ${tier}`.slice(0, 127);

/** `nf D i end`: no policy or profile allowed. */
export const listEndFlowPrefix = (direction: Direction): string => `nf D ${DIRECTION[direction]} end`;

/** The decision of a prefix, or undefined for one that is not a flow log's. */
export function parseFlowPrefix(prefix: string): FlowDecision | undefined {
  const [tag, action, direction, what, rest] = prefix.split(' ', 5);
  if (tag !== 'nf' || (action !== 'A' && action !== 'D') || (direction !== 'i' && direction !== 'e') || what === undefined)
    return undefined;
  const base = { direction: direction === 'i' ? ('ingress' as const) : ('egress' as const) };
  if (what === 'end' && action === 'D') return { ...base, action: 'Deny', end: true };
  if (what === 'tier' && action === 'D') return { ...base, action: 'Deny', tier: prefix.split(' ').slice(4).join(' ') };
  const rule = Number(rest);
  if (!/^[0-9a-f]{16}$/.test(what) || !Number.isInteger(rule)) return undefined;
  return { ...base, action: action === 'A' ? 'Allow' : 'Deny', policyHash: what, rule };
}
