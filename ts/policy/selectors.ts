// The selectors a policy's fields stand for, written over an endpoint's labels alone: a
// namespaceSelector reads the namespace's labels, which endpoints carry with the `pcns.` prefix
// (from their namespace's profile); a service account's, with `pcsa.`; a namespaced policy's
// selectors are confined to its namespace. One selector per rule end, in canonical text, so that
// rules meaning the same peers share one set.
import { formatSelector, canonicalSelector } from '../selectors/format.ts';
import { parseSelector } from '../selectors/parse.ts';
import { ALL, type Selector } from '../selectors/syntax.ts';
import {
  ENDPOINT_LABELS,
  NAMESPACE_LABEL_PREFIX,
  SERVICE_ACCOUNT_LABEL_PREFIX,
  type EntityRule,
  type PolicySpec,
  type ServiceAccountMatch,
} from '../model/policy.ts';

const HAS_NAMESPACE: Selector = { kind: 'has', key: ENDPOINT_LABELS.namespace };

/** Every key of `selector` with `prefix` before it; all() and global() as `replace` says. */
function rewritten(selector: Selector, prefix: string, replace: { all: Selector; global: Selector }): Selector {
  switch (selector.kind) {
    case 'all':
      return replace.all;
    case 'global':
      return replace.global;
    case 'not':
      return { kind: 'not', operand: rewritten(selector.operand, prefix, replace) };
    case 'and':
    case 'or':
      return { kind: selector.kind, operands: selector.operands.map((operand) => rewritten(operand, prefix, replace)) };
    default:
      return { ...selector, key: `${prefix}${selector.key}` };
  }
}

function and(...selectors: (Selector | undefined)[]): Selector | undefined {
  const given = selectors.filter((s): s is Selector => s !== undefined);
  if (given.length === 0) return undefined;
  return given.length === 1 ? given[0] : { kind: 'and', operands: given };
}

/**
 * A namespaceSelector over endpoint labels: `all()` means every namespaced endpoint, `global()`
 * those of no namespace (global network sets), anything else the namespace's labels.
 */
function namespaceSelector(text: string): Selector {
  return rewritten(parseSelector(text, { allowGlobal: true }), NAMESPACE_LABEL_PREFIX, {
    all: HAS_NAMESPACE,
    global: { kind: 'not', operand: HAS_NAMESPACE },
  });
}

/** A service account match over endpoint labels: its names and its labels' selector, both holding. */
function serviceAccountSelector(match: ServiceAccountMatch): Selector | undefined {
  const bySelector = match.selector === undefined ? undefined : prefixed(parseSelector(match.selector), SERVICE_ACCOUNT_LABEL_PREFIX);
  const byName: Selector | undefined =
    match.names && match.names.length > 0 ? { kind: 'in', key: ENDPOINT_LABELS.serviceAccount, values: new Set(match.names) } : undefined;
  return and(bySelector, byName);
}

const prefixed = (selector: Selector, prefix: string) => rewritten(selector, prefix, { all: ALL, global: ALL });

const inNamespace = (namespace: string): Selector => ({ kind: 'equals', key: ENDPOINT_LABELS.namespace, value: namespace });

/**
 * The endpoints one end of a rule names by selector (undefined: it names none, any address may
 * match). In a namespaced policy, as soon as any selector field is used, only the policy's
 * namespace counts unless a namespaceSelector says otherwise; a notSelector alone thus means "in
 * this namespace, but not these".
 */
export function entitySelector(entity: EntityRule, namespace: string | undefined): Selector | undefined {
  const scope =
    entity.namespaceSelector !== undefined
      ? namespaceSelector(entity.namespaceSelector)
      : namespace !== undefined
        ? inNamespace(namespace)
        : undefined;
  const own = and(
    entity.serviceAccounts ? serviceAccountSelector(entity.serviceAccounts) : undefined,
    entity.selector === undefined ? undefined : parseSelector(entity.selector),
  );
  const used = own !== undefined || entity.notSelector !== undefined || entity.namespaceSelector !== undefined;
  return used ? and(scope, own) : undefined;
}

/** The endpoints a policy applies to. */
export function policySelector(
  spec: Pick<PolicySpec, 'selector' | 'namespaceSelector' | 'serviceAccountSelector'>,
  namespace: string | undefined,
): Selector {
  return (
    and(
      namespace !== undefined ? inNamespace(namespace) : undefined,
      parseSelector(spec.selector ?? 'all()'),
      spec.namespaceSelector !== undefined ? namespaceSelector(spec.namespaceSelector) : undefined,
      spec.serviceAccountSelector !== undefined
        ? prefixed(parseSelector(spec.serviceAccountSelector), SERVICE_ACCOUNT_LABEL_PREFIX)
        : undefined,
    ) ?? ALL
  );
}

/** The selector in canonical form and its text: the key of the set of what it matches. */
export function canonical(selector: Selector): { selector: Selector; text: string } {
  return { selector: canonicalSelector(selector), text: formatSelector(selector) };
}
