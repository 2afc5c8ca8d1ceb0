// Whether labels match a selector: the one evaluation of every selector, whichever syntax it was
// written in. Chains of `&&` and `||` are loops over their operands; only nesting recurses, and
// parsed selectors nest at most MAX_SELECTOR_DEPTH levels.
import type { Labels, Selector } from './syntax.ts';

/** A label's value, own properties only: a key such as `constructor` is not a label of every object. */
const labelValue = (labels: Labels, key: string): string | undefined => (Object.hasOwn(labels, key) ? labels[key] : undefined);

export function matches(selector: Selector, labels: Labels): boolean {
  switch (selector.kind) {
    case 'all':
    case 'global':
      return true;
    case 'has':
      return Object.hasOwn(labels, selector.key);
    case 'equals':
      return labelValue(labels, selector.key) === selector.value;
    case 'notEquals':
      return labelValue(labels, selector.key) !== selector.value;
    case 'in': {
      const value = labelValue(labels, selector.key);
      return value !== undefined && selector.values.has(value);
    }
    case 'notIn': {
      const value = labelValue(labels, selector.key);
      return value === undefined || !selector.values.has(value);
    }
    case 'contains':
      return labelValue(labels, selector.key)?.includes(selector.value) ?? false;
    case 'startsWith':
      return labelValue(labels, selector.key)?.startsWith(selector.value) ?? false;
    case 'endsWith':
      return labelValue(labels, selector.key)?.endsWith(selector.value) ?? false;
    case 'not':
      return !matches(selector.operand, labels);
    case 'and':
      for (const operand of selector.operands) if (!matches(operand, labels)) return false;
      return true;
    case 'or':
      for (const operand of selector.operands) if (matches(operand, labels)) return true;
      return false;
  }
}
