// A policy document checked against its kind's schema (policy-schema.ts), with the message a
// person can act on: the resource, the field's path and the value found. Defaults are filled in
// where the meaning needs them (types, tier, selector; the order stays absent, meaning "last").
import type * as z from 'zod/mini';

import { fieldPath } from '../config/issues.ts';
import { describeValue } from '../log/echo.ts';
import type { Entry } from './entry.ts';
import { StoreDocumentError } from './errors.ts';
import {
  DEFAULT_TIER,
  DEFAULT_TIER_ORDER,
  KUBERNETES_POLICY_PREFIX,
  NAMESPACED_KINDS,
  POLICY_KINDS,
  policyKindPrefix,
  policyResourceKey,
  type NetworkPolicyResource,
  type PolicyKind,
  type PolicyResource,
  type PolicyType,
} from './policy.ts';
import { policySchemas } from './policy-schema.ts';

/** A document that is not a valid resource: `field` is its path (`spec.ingress[0].action`). */
export class PolicyDocumentError extends Error {
  override readonly name = 'PolicyDocumentError';
  readonly field: string;

  constructor(message: string, field: string) {
    super(message);
    this.field = field;
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** `NetworkPolicy "ns/name"`, or as much of it as the document says. */
function label(document: unknown, namespace: string | undefined): string {
  if (!isObject(document)) return 'the document';
  const kind = typeof document['kind'] === 'string' ? document['kind'] : 'document';
  const metadata = isObject(document['metadata']) ? document['metadata'] : {};
  const name = typeof metadata['name'] === 'string' ? metadata['name'] : undefined;
  if (name === undefined) return kind;
  const ns = typeof metadata['namespace'] === 'string' ? metadata['namespace'] : namespace;
  return `${kind} "${NAMESPACED_KINDS.has(kind as PolicyKind) && ns ? `${ns}/` : ''}${name}"`;
}

/**
 * The resource `document` describes, checked, with its namespace (`namespace` when it names none)
 * and defaults; a PolicyDocumentError names the field and the value otherwise.
 */
export function checkPolicyDocument(document: unknown, namespace = 'default'): PolicyResource {
  const fail = (field: string, problem: string): never => {
    throw new PolicyDocumentError(`${label(document, namespace)}: field "${field}" ${problem}`, field);
  };
  if (!isObject(document)) return fail('(top level)', `must be an object, got ${describeValue(document, 64)}`);
  const kind = document['kind'];
  if (!POLICY_KINDS.includes(kind as PolicyKind))
    return fail('kind', `must be one of ${POLICY_KINDS.join(', ')}, got ${describeValue(kind, 64)}`);
  const parsed = policySchemas[kind as PolicyKind].safeParse(document);
  if (!parsed.success) {
    const issue = parsed.error.issues[0] as z.core.$ZodIssue;
    if (issue.code === 'unrecognized_keys') {
      const field = fieldPath([...issue.path, issue.keys[0] as string]);
      return fail(field, 'is not a field netplug knows (check its spelling and its place)');
    }
    return fail(fieldPath(issue.path), problem(issue, document));
  }
  const resource = parsed.data as PolicyResource;
  const metadata = { ...resource.metadata };
  if (NAMESPACED_KINDS.has(resource.kind)) metadata.namespace = metadata.namespace ?? namespace;
  if ((resource.kind === 'NetworkPolicy' || resource.kind === 'GlobalNetworkPolicy') && metadata.name.startsWith(KUBERNETES_POLICY_PREFIX))
    fail(
      'metadata.name',
      `must not start with "${KUBERNETES_POLICY_PREFIX}" (the names of Kubernetes NetworkPolicies), got "${metadata.name}"`,
    );
  if (resource.kind === 'Tier' && metadata.name === DEFAULT_TIER) {
    if (resource.spec.order !== undefined && resource.spec.order !== DEFAULT_TIER_ORDER)
      fail('spec.order', `of tier default must be ${DEFAULT_TIER_ORDER}, got ${resource.spec.order}`);
    if (resource.spec.defaultAction !== undefined && resource.spec.defaultAction !== 'Deny')
      fail('spec.defaultAction', `of tier default must be Deny, got "${resource.spec.defaultAction}"`);
  }
  return withPolicyDefaults({ ...resource, metadata } as PolicyResource);
}

/** The defaults a policy's meaning needs, filled in: types, tier, selector. */
function withPolicyDefaults<R extends PolicyResource>(resource: R): R {
  if (resource.kind !== 'NetworkPolicy' && resource.kind !== 'GlobalNetworkPolicy') return resource;
  const spec = (resource as NetworkPolicyResource).spec;
  return { ...resource, spec: { ...spec, tier: spec.tier ?? DEFAULT_TIER, selector: spec.selector ?? 'all()', types: typesOf(spec) } };
}

/** Ingress, and Egress when there are egress rules: what `types` means when absent. */
export function typesOf(spec: NetworkPolicyResource['spec']): PolicyType[] {
  return spec.types ?? ((spec.egress?.length ?? 0) > 0 ? ['Ingress', 'Egress'] : ['Ingress']);
}

/** What is wrong, with the value found (zod/mini's issues do not carry it). */
function problem(issue: z.core.$ZodIssue, document: unknown): string {
  const got = issue.path.reduce<unknown>(
    (value, key) => (isObject(value) || Array.isArray(value) ? (value as never)[key] : undefined),
    document,
  );
  if (got === undefined && issue.code === 'invalid_type') return 'is required';
  const found = `, got ${describeValue(got, 64)}`;
  const own = !/^(Invalid|Too (small|big)|Expected|Unrecognized)/.test(issue.message);
  if (own) return `${issue.message}${found}`;
  switch (issue.code) {
    case 'invalid_type':
      return `must be ${/^[aeiou]/.test(issue.expected) ? 'an' : 'a'} ${issue.expected === 'int' ? 'whole number' : issue.expected}${found}`;
    case 'invalid_value':
      return `must be ${issue.values.map((v) => JSON.stringify(v)).join(' or ')}${found}`;
    case 'too_small':
      return `must be at least ${String(issue.minimum)}${found}`;
    case 'too_big':
      return `must be at most ${String(issue.maximum)}${found}`;
    default:
      return `is invalid${found}`;
  }
}

/**
 * A policy resource read from the datastore, checked: one that fails is reported by the agent
 * and skipped. The key says its kind, namespace and name, which the document must agree with.
 */
export function checkedPolicyEntry(entry: Entry<unknown>, kind: PolicyKind): Entry<PolicyResource> {
  const key = entry.key;
  const rest = key.startsWith(policyKindPrefix(kind)) ? key.slice(policyKindPrefix(kind).length) : key;
  const [namespace, name] = NAMESPACED_KINDS.has(kind) ? rest.split('/') : [undefined, rest];
  try {
    const value = isObject(entry.value) ? { kind, apiVersion: 'projectnet.org/v3', ...entry.value } : entry.value;
    const resource = checkPolicyDocument(value, namespace);
    if (resource.kind !== kind || policyResourceKey(kind, resource.metadata.name, resource.metadata.namespace) !== key)
      throw new PolicyDocumentError(
        `${label(value, namespace)}: is not the ${kind} "${namespace ? `${namespace}/` : ''}${name}" its key names`,
        'metadata.name',
      );
    return { ...entry, value: resource };
  } catch (err) {
    if (!(err instanceof PolicyDocumentError)) throw err;
    throw new StoreDocumentError(`the datastore's document at ${key} is broken: ${err.message}; repair or remove it`);
  }
}
