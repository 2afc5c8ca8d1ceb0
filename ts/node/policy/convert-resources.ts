// What the feed gives the policy compiler for a followed object (feed-engine.ts): a followed
// resource converted (Kubernetes NetworkPolicies, namespaces and service accounts as profiles) or
// checked (netplug's documents, as netplugctl checks them), and the engine call that removes it.
import { hash } from 'node:crypto';

import type * as k8s from '@kubernetes/client-node';

import { checkPolicyDocument } from '../../model/policy-check.ts';
import {
  KUBERNETES_POLICY_PREFIX,
  namespaceProfileName,
  serviceAccountProfileName,
  type NetworkPolicyResource,
  type NetworkSetResource,
  type PolicyResource,
} from '../../model/policy.ts';
import type { PolicyEngine } from '../../policy/engine.ts';
import { convertKubernetesPolicy, namespaceProfile, servedKubernetesPolicy, serviceAccountProfile } from '../../policy/kubernetes.ts';
import type { FollowedKind } from './follow-resources.ts';

/** The kinds a source may give: the Kubernetes API's (FOLLOWED_KINDS), or the etcd datastore's documents. */
export type FeedKind = FollowedKind | 'WorkloadEndpoint' | 'Profile';

/**
 * `object` of `kind` as the engine takes it; what of it could not be converted goes to `issues`.
 * Throws PolicyDocumentError for a document that fails its check.
 */
export function convertedResource(
  kind: FeedKind,
  object: k8s.KubernetesObject,
  issues: string[],
  kubernetesPoliciesFollowed: boolean,
): PolicyResource | { profile: ReturnType<typeof namespaceProfile> } {
  const metadata = { name: object.metadata?.name ?? '', namespace: object.metadata?.namespace, labels: object.metadata?.labels };
  switch (kind) {
    case 'Namespace':
      return { profile: namespaceProfile({ metadata }) };
    case 'ServiceAccount':
      return { profile: serviceAccountProfile({ metadata }) };
    case 'KubernetesNetworkPolicy': {
      const converted = convertKubernetesPolicy(servedKubernetesPolicy(object));
      issues.push(...converted.issues.map((issue) => `${issue.field}: ${issue.message}`));
      return converted.policy;
    }
    case 'NetworkPolicy': {
      // On etcd, netplug-kube-controllers writes Kubernetes NetworkPolicies under their reserved
      // names (`knp.default.*`), which no user's document may take: checked as the rest are, under
      // the name they convert from.
      const name = object.metadata?.name ?? '';
      if (!name.startsWith(KUBERNETES_POLICY_PREFIX) || kubernetesPoliciesFollowed) break;
      const document = userDocument({ ...object, metadata: { ...object.metadata, name: name.slice(KUBERNETES_POLICY_PREFIX.length) } });
      const checked = checkPolicyDocument(document, object.metadata?.namespace);
      return { ...checked, metadata: { ...checked.metadata, name } };
    }
  }
  return checkPolicyDocument(userDocument(object), object.metadata?.namespace);
}

/** Removes the engine's resource of `kind` named `name`. */
export function removeResource(engine: PolicyEngine, kind: FeedKind, name: string, namespace: string | undefined): void {
  switch (kind) {
    case 'Profile':
      engine.removeProfile(name);
      break;
    case 'Namespace':
      engine.removeProfile(namespaceProfileName(name));
      break;
    case 'ServiceAccount':
      engine.removeProfile(serviceAccountProfileName(namespace ?? 'default', name));
      break;
    case 'KubernetesNetworkPolicy':
      engine.removePolicy('NetworkPolicy', `${KUBERNETES_POLICY_PREFIX}${name}`, namespace);
      break;
    case 'NetworkPolicy':
    case 'GlobalNetworkPolicy':
      engine.removePolicy(kind as NetworkPolicyResource['kind'], name, namespace);
      break;
    case 'NetworkSet':
    case 'GlobalNetworkSet':
      engine.removeNetworkSet(kind as NetworkSetResource['kind'], name, namespace);
      break;
    case 'Tier':
      engine.removeTier(name);
      break;
    case 'Pod':
      engine.removeEndpoint(`${namespace ?? 'default'}/${name}`);
      break;
    case 'HostEndpoint':
      engine.removeHostEndpoint(name);
      break;
  }
}

/** The document a user wrote (what checkPolicyDocument reads): no server fields, no status. */
function userDocument(object: k8s.KubernetesObject): unknown {
  const { name, namespace, labels, annotations } = object.metadata ?? {};
  return {
    kind: object.kind,
    apiVersion: object.apiVersion,
    metadata: {
      name,
      ...(namespace ? { namespace } : {}),
      ...(labels && Object.keys(labels).length > 0 ? { labels } : {}),
      ...(annotations && Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
    spec: (object as { spec?: unknown }).spec ?? {},
  };
}

/**
 * A short digest of a value's JSON: what the feed keeps to tell a resource changed (crypto.hash:
 * one call without a Hash object, half the time over thousands of policies).
 */
export const digestOf = (value: unknown): string => hash('sha256', JSON.stringify(value), 'base64');

/** Whether two JSON-like values are the same content (a key whose value is undefined counts as absent, as in JSON). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((item, i) => sameJson(item, other[i]));
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left).filter((key) => left[key] !== undefined);
  if (keys.length !== Object.keys(right).filter((key) => right[key] !== undefined).length) return false;
  return keys.every((key) => sameJson(left[key], right[key]));
}
