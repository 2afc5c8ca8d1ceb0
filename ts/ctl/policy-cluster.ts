// What netplugctl reads of the cluster for get and explain: netplug's policy resources from the
// datastore (checked; a broken one is reported, never used), and the endpoints and profiles: on the
// Kubernetes datastore from the API (pods, namespaces, service accounts, Kubernetes
// NetworkPolicies, converted as netplug-node converts them), on etcd from the workload endpoints
// and profiles stored there. The built-in profile projectnet-default-allow is among the profiles on
// both: computed on the Kubernetes datastore; on etcd as netplug-node has it (policy/default-allow.ts),
// whether or not netplug-kube-controllers has stored it yet.
import { checkedPolicyEntry } from '../model/policy-check.ts';
import {
  NAMESPACED_KINDS,
  policyKindPrefix,
  type NetworkPolicyResource,
  type NetworkSetResource,
  type PolicyKind,
  type PolicyResource,
  type ProfileResource,
  type TierResource,
} from '../model/policy.ts';
import { keys } from '../model/keys.ts';
import type { WorkloadEndpoint } from '../model/workload-endpoint.ts';
import { endpointOfPod, endpointOfWorkload, type KubePod } from '../policy/endpoints.ts';
import type { PolicySnapshot } from '../policy/explain.ts';
import { defaultAllowProfile, isDefaultAllowProfile } from '../policy/default-allow.ts';
import { convertKubernetesPolicy, namespaceProfile, serviceAccountProfile, type KubeNetworkPolicy } from '../policy/kubernetes.ts';
import { KubeStore } from '../store/kubernetes/store.ts';
import type { Store } from '../store/store.ts';

/** The stored resources of a kind (of one namespace, when given), checked; a broken one is thrown, unless `broken` collects them. */
export async function readResources(store: Store, kind: PolicyKind, namespace?: string, broken?: string[]): Promise<PolicyResource[]> {
  if (kind === 'Profile' && store instanceof KubeStore) return kubeProfiles(store);
  const prefix = policyKindPrefix(kind, NAMESPACED_KINDS.has(kind) ? namespace : undefined);
  const entries = await store.list(prefix);
  const out: PolicyResource[] = [];
  if (kind === 'Profile') out.push(defaultAllowProfile());
  for (const entry of entries) {
    // The built-in profile is the one above, whatever the stored copy says.
    if (kind === 'Profile' && isDefaultAllowProfile(entry.key.slice(prefix.length))) continue;
    try {
      out.push(checkedPolicyEntry(entry, kind).value);
    } catch (err) {
      if (!broken) throw err;
      broken.push((err as Error).message);
    }
  }
  return out;
}

async function kubeList<T>(store: KubeStore, path: string, needs: string): Promise<T[]> {
  return (await store.client.get<{ items: T[] | null }>(path, needs))?.items ?? [];
}

/** The profiles the Kubernetes datastore computes: one per namespace and per service account, and the built-in one. */
async function kubeProfiles(store: KubeStore): Promise<ProfileResource[]> {
  const namespaces = await kubeList<{ metadata: { name: string; labels?: Record<string, string> } }>(
    store,
    '/api/v1/namespaces',
    'list on namespaces',
  );
  const accounts = await kubeList<{ metadata: { name: string; namespace?: string; labels?: Record<string, string> } }>(
    store,
    '/api/v1/serviceaccounts',
    'list on serviceaccounts',
  );
  return [...namespaces.map(namespaceProfile), ...accounts.map(serviceAccountProfile), defaultAllowProfile()];
}

/** Everything explain needs; `issues` collects what could not be used (broken documents, rules left out). */
export async function readSnapshot(store: Store, issues: string[]): Promise<PolicySnapshot> {
  const policies = [
    ...((await readResources(store, 'NetworkPolicy', undefined, issues)) as NetworkPolicyResource[]),
    ...((await readResources(store, 'GlobalNetworkPolicy', undefined, issues)) as NetworkPolicyResource[]),
  ];
  const networkSets = [
    ...((await readResources(store, 'NetworkSet', undefined, issues)) as NetworkSetResource[]),
    ...((await readResources(store, 'GlobalNetworkSet', undefined, issues)) as NetworkSetResource[]),
  ];
  const tiers = (await readResources(store, 'Tier', undefined, issues)) as TierResource[];
  if (store instanceof KubeStore) {
    const pods = await kubeList<KubePod>(store, '/api/v1/pods', 'list on pods');
    const kubePolicies = await kubeList<KubeNetworkPolicy>(
      store,
      '/apis/networking.k8s.io/v1/networkpolicies',
      'list on networkpolicies.networking.k8s.io',
    );
    for (const policy of kubePolicies) {
      try {
        const converted = convertKubernetesPolicy(policy);
        policies.push(converted.policy);
        for (const issue of converted.issues)
          issues.push(
            `Kubernetes NetworkPolicy ${policy.metadata.namespace}/${policy.metadata.name}: field "${issue.field}": ${issue.message}`,
          );
      } catch (err) {
        issues.push(
          `Kubernetes NetworkPolicy ${policy.metadata.namespace}/${policy.metadata.name} is not programmed: ${(err as Error).message}`,
        );
      }
    }
    return {
      endpoints: pods.flatMap((pod) => endpointOfPod(pod) ?? []),
      profiles: await kubeProfiles(store),
      networkSets,
      policies,
      tiers,
    };
  }
  const endpoints = (await store.list<WorkloadEndpoint>(keys.workloadEndpoints)).flatMap((entry) => {
    try {
      return [endpointOfWorkload(entry.value)];
    } catch {
      issues.push(`the datastore's workload endpoint at ${entry.key} is broken; left out`);
      return [];
    }
  });
  const profiles = (await readResources(store, 'Profile', undefined, issues)) as ProfileResource[];
  return { endpoints, profiles, networkSets, policies, tiers };
}
