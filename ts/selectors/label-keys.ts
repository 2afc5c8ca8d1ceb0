// What an index of labelled objects needs to avoid evaluating every selector on every object: the
// label keys a selector reads (a change to none of them cannot change whether it matches), and the
// labels every object it matches must carry (so candidates can be looked up by key and value).
import type { Selector } from './syntax.ts';

/** Every label key the selector reads. */
export function labelKeys(selector: Selector): ReadonlySet<string> {
  const keys = new Set<string>();
  const pending: Selector[] = [selector];
  for (let node = pending.pop(); node; node = pending.pop()) {
    switch (node.kind) {
      case 'all':
      case 'global':
        break;
      case 'not':
        pending.push(node.operand);
        break;
      case 'and':
      case 'or':
        pending.push(...node.operands);
        break;
      default:
        keys.add(node.key);
    }
  }
  return keys;
}

/**
 * The labels every object the selector matches carries: per key, the values it may have, or
 * undefined when any value may do. Keys it does not list constrain nothing; an empty set of
 * values means the selector matches nothing. Conservative under `!`, which it does not look into.
 */
export function requiredLabels(selector: Selector): ReadonlyMap<string, ReadonlySet<string> | undefined> {
  switch (selector.kind) {
    case 'has':
    case 'contains':
    case 'startsWith':
    case 'endsWith':
      return new Map([[selector.key, undefined]]);
    case 'equals':
      return new Map([[selector.key, new Set([selector.value])]]);
    case 'in':
      return new Map([[selector.key, selector.values]]);
    case 'and': {
      const required = new Map<string, ReadonlySet<string> | undefined>();
      for (const operand of selector.operands) {
        for (const [key, values] of requiredLabels(operand)) {
          const known = required.get(key);
          required.set(
            key,
            !required.has(key) || known === undefined ? values : values === undefined ? known : intersection(known, values),
          );
        }
      }
      return required;
    }
    case 'or': {
      const [first, ...rest] = selector.operands.map(requiredLabels);
      const required = new Map(first);
      for (const other of rest) {
        for (const [key, values] of required) {
          if (!other.has(key)) required.delete(key);
          else {
            const more = other.get(key);
            required.set(key, values === undefined || more === undefined ? undefined : new Set([...values, ...more]));
          }
        }
      }
      return required;
    }
    default:
      return new Map();
  }
}

function intersection(a: ReadonlySet<string>, b: ReadonlySet<string>): ReadonlySet<string> {
  return new Set([...a].filter((value) => b.has(value)));
}
