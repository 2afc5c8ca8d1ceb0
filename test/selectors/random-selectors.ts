// Random selector trees and labels over small alphabets (so that they match often enough to tell
// selectors apart), seeded per case as the fuzz suite seeds its cases.
import type { Labels, Selector } from '../../ts/selectors/syntax.ts';
import type { Rng } from '../fuzz/lib/prng.ts';

/** Keys including the language's own words, which must stay usable as label keys. */
export const KEYS = ['a', 'b', 'zone', 'has', 'in', 'not', 'contains', 'kubernetes.io/os', 'x-y_z.w'];
/** Values with either quote, both, a backslash, a newline, nothing. */
export const VALUES = ['', 'a', 'b', 'ab', "it's", 'say "hi"', `both ' and "`, 'back\\slash', 'new\nline', 'ünï'];

export function randomLabels(rng: Rng): Labels {
  const labels: Record<string, string> = {};
  for (const key of KEYS) if (rng.chance(0.5)) labels[key] = rng.pick(VALUES);
  return labels;
}

const values = (rng: Rng) => new Set(Array.from({ length: rng.int(4) }, () => rng.pick(VALUES)));

/** A tree at most `depth` levels deep; `global()` only when `global`. */
export function randomSelector(rng: Rng, depth: number, global = false): Selector {
  const key = rng.pick(KEYS);
  const value = rng.pick(VALUES);
  switch (rng.int(depth > 0 ? 14 : 11)) {
    case 0:
      return rng.chance(0.3) && global ? { kind: 'global' } : { kind: 'all' };
    case 1:
      return { kind: 'has', key };
    case 2:
      return { kind: 'equals', key, value };
    case 3:
      return { kind: 'notEquals', key, value };
    case 4:
      return { kind: 'in', key, values: values(rng) };
    case 5:
      return { kind: 'notIn', key, values: values(rng) };
    case 6:
      return { kind: 'contains', key, value };
    case 7:
      return { kind: 'startsWith', key, value };
    case 8:
      return { kind: 'endsWith', key, value };
    case 9:
    case 10:
      return { kind: 'has', key: rng.pick(KEYS) };
    case 11:
      return { kind: 'not', operand: randomSelector(rng, depth - 1, global) };
    default:
      return {
        kind: rng.chance(0.5) ? 'and' : 'or',
        operands: Array.from({ length: 1 + rng.int(4) }, () => randomSelector(rng, depth - 1, global)),
      };
  }
}

/** The same selector written another way: operands shuffled and repeated, `!!` added, sets of one as `==`. */
export function rewritten(rng: Rng, selector: Selector): Selector {
  switch (selector.kind) {
    case 'and':
    case 'or': {
      const operands = selector.operands.map((operand) => rewritten(rng, operand));
      if (rng.chance(0.3)) operands.push(rng.pick(operands));
      for (let i = operands.length - 1; i > 0; i--) {
        const j = rng.int(i + 1);
        [operands[i], operands[j]] = [operands[j] as Selector, operands[i] as Selector];
      }
      return { kind: selector.kind, operands };
    }
    case 'not':
      return { kind: 'not', operand: rewritten(rng, selector.operand) };
    case 'equals':
      if (rng.chance(0.3)) return { kind: 'in', key: selector.key, values: new Set([selector.value]) };
      break;
    case 'notEquals':
      if (rng.chance(0.3)) return { kind: 'not', operand: { kind: 'equals', key: selector.key, value: selector.value } };
      break;
  }
  return rng.chance(0.15) ? { kind: 'not', operand: { kind: 'not', operand: selector } } : selector;
}
