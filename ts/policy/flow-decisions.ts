// The numbers that name, in a connection's mark, the rule that allowed it. With flow logs on, an
// Allow rule writes its number into the new connection's conntrack mark (`ct mark set`), the high
// 16 bits when it decides egress (at the source's end), the low 16 when it decides ingress; the
// kernel then does all of an allowed connection's flow-log work, and the agent reads the marks
// back from connection tracking (the addon's flow tracker) each interval. Numbers come from a
// hash of the rule, the next free one on a clash, so that the same policies get mostly the same
// numbers after an agent restart and connections from before it keep their names. A number is not
// given to another rule while the agent runs; past 65,534 rules a direction, the rest share
// UNNAMED and their flows are recorded without their rule.
import { hashOf } from './names.ts';
import type { Direction } from './program.ts';

/** The number a rule gets when its direction's numbers are used up. */
export const UNNAMED = 0xffff;
const SPACE = 0xfffe;

/** What a number names: a rule of a policy (or profile) by its key's hash. */
export interface MarkedRule {
  policyHash: string;
  rule: number;
}

/** What an Allow rule's `ct mark set` does: the bits of its direction cleared, its number set. */
export function flowMark(direction: Direction, number: number): { clear: number; or: number } {
  return direction === 'egress' ? { clear: 0xffff0000, or: number * 0x10000 } : { clear: 0xffff, or: number };
}

export class FlowDecisions {
  readonly #numbers: Record<Direction, Map<string, number>> = { ingress: new Map(), egress: new Map() };
  readonly #decisions: Record<Direction, Map<number, MarkedRule>> = { ingress: new Map(), egress: new Map() };

  /** The number of rule `rule` of the policy whose key hashes to `policyHash`, deciding `direction`. */
  numberOf(direction: Direction, policyHash: string, rule: number): number {
    const key = `${policyHash} ${rule}`;
    const numbers = this.#numbers[direction];
    const known = numbers.get(key);
    if (known !== undefined) return known;
    const decisions = this.#decisions[direction];
    if (decisions.size >= SPACE) return UNNAMED;
    let number = (Number.parseInt(hashOf(`${direction} ${key}`).slice(0, 8), 16) % SPACE) + 1;
    while (decisions.has(number)) number = (number % SPACE) + 1;
    numbers.set(key, number);
    decisions.set(number, { policyHash, rule });
    return number;
  }

  /** The rule `number` names in `direction`, if any. */
  decision(direction: Direction, number: number): MarkedRule | undefined {
    return this.#decisions[direction].get(number);
  }
}
