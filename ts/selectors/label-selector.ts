// Kubernetes label selectors (`matchLabels`, `matchExpressions`) as selector trees: the same tree,
// evaluation and canonical text as the netplug language, so a Kubernetes NetworkPolicy and a netplug
// policy that select the same pods share one set of them.
//
// An empty selector matches every object. A null or absent one is not handed here: what it means
// depends on the field, and the caller decides. For a NetworkPolicy: `spec.podSelector` is
// required, empty selecting every pod of the policy's namespace; in a peer (`from`, `to`), an
// absent `podSelector` next to a `namespaceSelector` selects every pod of those namespaces (all()),
// an absent `namespaceSelector` means the policy's own namespace (not every namespace), and a peer
// with neither is an `ipBlock`.
import { LABEL_KEY } from './parse.ts';
import { ALL, SelectorError, type Selector } from './syntax.ts';

interface LabelSelectorRequirement {
  key: string;
  operator: string;
  values?: readonly string[] | null | undefined;
}

/** As the Kubernetes API gives it (@kubernetes/client-node's V1LabelSelector fits). */
export interface LabelSelector {
  matchLabels?: Readonly<Record<string, string>> | null | undefined;
  matchExpressions?: readonly LabelSelectorRequirement[] | null | undefined;
}

const OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'];

/**
 * The tree of a label selector: every `matchLabels` pair and every requirement must hold. `field`
 * names the selector in errors (`spec.podSelector`); a requirement the API server would refuse
 * (an unknown operator, values where none belong or none where some must be) is a SelectorError.
 */
export function fromLabelSelector(selector: LabelSelector, field = 'selector'): Selector {
  if (typeof selector !== 'object' || selector === null)
    throw new SelectorError(`${field} is absent: the caller decides what an absent selector means`);
  const terms: Selector[] = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    terms.push({ kind: 'equals', key: checkedKey(key, `${field}.matchLabels`), value });
  }
  (selector.matchExpressions ?? []).forEach((requirement, i) => {
    const at = `${field}.matchExpressions[${i}]`;
    terms.push(requirementSelector(requirement, at));
  });
  return terms.length === 0 ? ALL : terms.length === 1 ? (terms[0] as Selector) : { kind: 'and', operands: terms };
}

function requirementSelector({ key, operator, values }: LabelSelectorRequirement, at: string): Selector {
  const name = checkedKey(key, `${at}.key`);
  const given = values ?? [];
  if (!OPERATORS.includes(operator))
    throw new SelectorError(`${at}.operator ${JSON.stringify(operator)} must be one of ${OPERATORS.join(', ')}`);
  if (operator === 'In' || operator === 'NotIn') {
    if (given.length === 0) throw new SelectorError(`${at}.values must not be empty for operator ${operator}`);
    return { kind: operator === 'In' ? 'in' : 'notIn', key: name, values: new Set(given) };
  }
  if (given.length > 0) throw new SelectorError(`${at}.values must be empty for operator ${operator}`);
  const has: Selector = { kind: 'has', key: name };
  return operator === 'Exists' ? has : { kind: 'not', operand: has };
}

function checkedKey(key: unknown, at: string): string {
  if (typeof key !== 'string' || !LABEL_KEY.test(key))
    throw new SelectorError(`${at}: ${JSON.stringify(key)} is not a label key (letters, digits, "-", "_", "." and "/")`);
  return key;
}
