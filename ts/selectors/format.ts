// The canonical text of a selector: equal selectors written differently (quotes, spacing,
// parentheses, the order of `&&` and `||` operands and of set values, repeats, `!!`, `!(k == "v")`
// for `k != "v"`, a set of one value for `==`) format the same, so the text can key a set of
// matching objects shared by every selector that reads the same. It parses back (parse.ts) to the
// same selector, no deeper than the text it was parsed from.
import { ALL, SelectorError, type Selector } from './syntax.ts';

interface Canonical {
  node: Selector;
  text: string;
  /** The operands of an `and` or `or`, each canonical. */
  parts?: Canonical[];
}

/** The selector in canonical form: what `formatSelector` writes. */
export const canonicalSelector = (selector: Selector): Selector => canonical(selector).node;

export const formatSelector = (selector: Selector): string => canonical(selector).text;

const KEY = /^[A-Za-z0-9_./-]+(?:\(\))?$/;

function key(name: string): string {
  if (!KEY.test(name)) throw new SelectorError(`label key ${JSON.stringify(name)} cannot be written in a selector`);
  return name;
}

/**
 * A value quoted as the reference writes it (double quotes, single ones around a double quote),
 * with netplug's backslash escapes only where the value holds a backslash or both quotes.
 */
function quoted(value: string): string {
  if (!/["\\]/.test(value)) return `"${value}"`;
  if (!/['\\]/.test(value)) return `'${value}'`;
  return `"${value.replace(/[\\"]/g, '\\$&')}"`;
}

// By code point: localeCompare would depend on the collation data, and is slower.
const byText = (a: Canonical, b: Canonical) => (a.text < b.text ? -1 : a.text > b.text ? 1 : 0);

function canonical(selector: Selector): Canonical {
  let negated = false;
  let inner = selector;
  // `!` after `!` in a loop: parsed selectors nest 64 of them at most, built ones any number.
  while (inner.kind === 'not') {
    negated = !negated;
    inner = inner.operand;
  }
  const positive = canonicalPositive(inner);
  return negated ? negate(positive) : positive;
}

function negate(c: Canonical): Canonical {
  const { node } = c;
  switch (node.kind) {
    case 'not':
      return canonical(node.operand);
    case 'equals':
      return leaf({ ...node, kind: 'notEquals' });
    case 'notEquals':
      return leaf({ ...node, kind: 'equals' });
    case 'in':
      return leaf({ ...node, kind: 'notIn' });
    case 'notIn':
      return leaf({ ...node, kind: 'in' });
    case 'and':
    case 'or':
      return { node: { kind: 'not', operand: node }, text: `!(${c.text})` };
    default:
      return { node: { kind: 'not', operand: node }, text: `!${c.text}` };
  }
}

function canonicalPositive(selector: Exclude<Selector, { kind: 'not' }>): Canonical {
  switch (selector.kind) {
    case 'and':
    case 'or':
      return chain(selector.kind, selector.operands);
    case 'in':
    case 'notIn': {
      const values = [...selector.values].sort();
      if (values.length === 1) {
        return leaf({ kind: selector.kind === 'in' ? 'equals' : 'notEquals', key: selector.key, value: values[0] as string });
      }
      return leaf({ kind: selector.kind, key: selector.key, values: new Set(values) });
    }
    default:
      return leaf(selector);
  }
}

function leaf(node: Exclude<Selector, { kind: 'not' | 'and' | 'or' }>): Canonical {
  return { node, text: leafText(node) };
}

function leafText(node: Exclude<Selector, { kind: 'not' | 'and' | 'or' }>): string {
  switch (node.kind) {
    case 'all':
      return 'all()';
    case 'global':
      return 'global()';
    case 'has':
      return `has(${key(node.key)})`;
    case 'equals':
      return `${key(node.key)} == ${quoted(node.value)}`;
    case 'notEquals':
      return `${key(node.key)} != ${quoted(node.value)}`;
    case 'in':
    case 'notIn':
      return `${key(node.key)} ${node.kind === 'in' ? 'in' : 'not in'} {${[...node.values].map(quoted).join(', ')}}`;
    case 'contains':
      return `${key(node.key)} contains ${quoted(node.value)}`;
    case 'startsWith':
      return `${key(node.key)} starts with ${quoted(node.value)}`;
    case 'endsWith':
      return `${key(node.key)} ends with ${quoted(node.value)}`;
  }
}

/**
 * `&&` or `||` of the operands: nested chains of the same operator flattened, `all()` dropped from
 * `&&` (and making an `||` all()), repeats dropped, the rest in the order of their text.
 */
function chain(kind: 'and' | 'or', operands: readonly Selector[]): Canonical {
  const parts = new Map<string, Canonical>();
  for (const operand of operands) {
    const c = canonical(operand);
    if (c.node.kind === 'all') {
      if (kind === 'or') return c;
      continue;
    }
    for (const part of c.node.kind === kind ? (c.parts as Canonical[]) : [c]) parts.set(part.text, part);
  }
  const sorted = [...parts.values()].sort(byText);
  if (sorted.length === 0) return leaf(ALL as { kind: 'all' });
  if (sorted.length === 1) return sorted[0] as Canonical;
  const text =
    kind === 'and'
      ? sorted.map((p) => (p.node.kind === 'or' ? `(${p.text})` : p.text)).join(' && ')
      : sorted.map((p) => p.text).join(' || ');
  return { node: { kind, operands: sorted.map((p) => p.node) }, text, parts: sorted };
}
