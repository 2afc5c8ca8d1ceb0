// The syntax tree of a selector: what netplug's selector language (parse.ts) and Kubernetes label
// selectors (label-selector.ts) both become, evaluated by one function (evaluate.ts), written in
// one canonical text (format.ts). `and` and `or` hold their operands in a list, so a long chain
// is one node, never a nesting as deep as the chain is long.

export type Labels = Readonly<Record<string, string>>;

export type Selector =
  /** Every object: `all()`, or an empty selector. */
  | { readonly kind: 'all' }
  /**
   * `global()`: in a netplug policy's `namespaceSelector`, the objects of no namespace (host
   * endpoints, global network sets). Labels alone cannot tell: it matches any labels, and the
   * caller that reads a namespaceSelector gives it its meaning.
   */
  | { readonly kind: 'global' }
  | { readonly kind: 'has'; readonly key: string }
  | { readonly kind: 'equals'; readonly key: string; readonly value: string }
  /** True when the label is absent, too. */
  | { readonly kind: 'notEquals'; readonly key: string; readonly value: string }
  | { readonly kind: 'in'; readonly key: string; readonly values: ReadonlySet<string> }
  /** True when the label is absent, too. */
  | { readonly kind: 'notIn'; readonly key: string; readonly values: ReadonlySet<string> }
  | { readonly kind: 'contains' | 'startsWith' | 'endsWith'; readonly key: string; readonly value: string }
  | { readonly kind: 'not'; readonly operand: Selector }
  | { readonly kind: 'and' | 'or'; readonly operands: readonly Selector[] };

export class SelectorError extends Error {
  override readonly name = 'SelectorError';
}

export const ALL: Selector = { kind: 'all' };
