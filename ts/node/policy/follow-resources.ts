// What the policy subsystem follows through the process's shared informers: every node's pods
// (remote pods are the peers selectors name), namespaces and service accounts (their labels, as
// profiles), Kubernetes NetworkPolicies, netplug's policy resources (projectnet.org/v3) and host
// endpoints (crd.projectnet.org/v1).
import * as k8s from '@kubernetes/client-node';

import { GROUP, POLICY_GROUP, VERSION } from '../../store/kubernetes/resources.ts';
import type { Informer, Informers } from '../../runtime/informers.ts';
import { allPods } from '../shared/pods.ts';

/** The kinds fed to the engine, each from one informer. */
export const FOLLOWED_KINDS = [
  'Pod',
  'Namespace',
  'ServiceAccount',
  'KubernetesNetworkPolicy',
  'NetworkPolicy',
  'GlobalNetworkPolicy',
  'NetworkSet',
  'GlobalNetworkSet',
  'Tier',
  'HostEndpoint',
] as const;
export type FollowedKind = (typeof FOLLOWED_KINDS)[number];

export type PolicyInformers = Record<FollowedKind, Informer<k8s.KubernetesObject>>;

const POLICY_VERSION = 'v3';

/** netplug's kinds by their plural (projectnet.org/v3). */
const PLURALS = {
  NetworkPolicy: 'networkpolicies',
  GlobalNetworkPolicy: 'globalnetworkpolicies',
  NetworkSet: 'networksets',
  GlobalNetworkSet: 'globalnetworksets',
  Tier: 'tiers',
} as const;

/**
 * The RBAC rules the subsystem's watches need (the manifests' ClusterRole of netplug-node must
 * hold them once enforcement is on).
 */
export const POLICY_WATCH_RULES: k8s.V1PolicyRule[] = [
  { apiGroups: [''], resources: ['namespaces', 'serviceaccounts'], verbs: ['list', 'watch'] },
  // A pod an ADD is served for is read when the watch has not heard of it yet (program-networked-pod.ts).
  { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['list', 'watch'] },
  { apiGroups: [POLICY_GROUP], resources: Object.values(PLURALS), verbs: ['list', 'watch'] },
  { apiGroups: [GROUP], resources: ['hostendpoints'], verbs: ['list', 'watch'] },
];

export function followPolicyResources(informers: Informers, kube: k8s.KubeConfig): PolicyInformers {
  const core = kube.makeApiClient(k8s.CoreV1Api);
  const networking = kube.makeApiClient(k8s.NetworkingV1Api);
  const custom = kube.makeApiClient(k8s.CustomObjectsApi);
  const follow = (what: string, path: string, list: () => Promise<unknown>) =>
    informers.informer<k8s.KubernetesObject>({ what, path, list: list as () => Promise<k8s.KubernetesListObject<k8s.KubernetesObject>> });
  const netplug = (kind: keyof typeof PLURALS) =>
    follow(`${PLURALS[kind]}.${POLICY_GROUP}`, `/apis/${POLICY_GROUP}/${POLICY_VERSION}/${PLURALS[kind]}`, () =>
      custom.listClusterCustomObject({ group: POLICY_GROUP, version: POLICY_VERSION, plural: PLURALS[kind] }),
    );
  return {
    // The same collections (path, selectors and view) as other subsystems' are the same informers.
    Pod: allPods(informers, kube),
    Namespace: follow('namespaces', '/api/v1/namespaces', () => core.listNamespace()),
    ServiceAccount: follow('service accounts', '/api/v1/serviceaccounts', () => core.listServiceAccountForAllNamespaces()),
    KubernetesNetworkPolicy: informers.informer<k8s.KubernetesObject>({
      what: 'networkpolicies.networking.k8s.io',
      path: '/apis/networking.k8s.io/v1/networkpolicies',
      list: () => networking.listNetworkPolicyForAllNamespaces() as Promise<k8s.KubernetesListObject<k8s.KubernetesObject>>,
      view: { name: 'policy', of: specAndIdentity },
    }),
    NetworkPolicy: netplug('NetworkPolicy'),
    GlobalNetworkPolicy: netplug('GlobalNetworkPolicy'),
    NetworkSet: netplug('NetworkSet'),
    GlobalNetworkSet: netplug('GlobalNetworkSet'),
    Tier: netplug('Tier'),
    HostEndpoint: follow(`hostendpoints.${GROUP}`, `/apis/${GROUP}/${VERSION}/hostendpoints`, () =>
      custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'hostendpoints' }),
    ),
  };
}

/**
 * What the policy subsystem reads of a Kubernetes NetworkPolicy (its conversion, the uid an Event
 * names): its identity and spec, not the rest of its metadata (timestamps, annotations), for
 * thousands of them.
 */
function specAndIdentity(object: k8s.KubernetesObject): k8s.KubernetesObject {
  const { name, namespace, uid, labels, resourceVersion, deletionTimestamp } = object.metadata ?? {};
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: { name, namespace, uid, labels, resourceVersion, deletionTimestamp },
    spec: (object as { spec?: unknown }).spec,
  } as k8s.KubernetesObject;
}

/** An object's key in its informer's cache: `<namespace>/<name>`, or the name of a cluster-wide object. */
export const objectKey = (object: k8s.KubernetesObject): string =>
  object.metadata?.namespace ? `${object.metadata.namespace}/${object.metadata.name ?? ''}` : (object.metadata?.name ?? '');

/** The object of `key` in `informer`'s cache. */
export function cached(informer: Informer<k8s.KubernetesObject>, key: string): k8s.KubernetesObject | undefined {
  const slash = key.indexOf('/');
  return slash < 0 ? informer.get(key) : informer.get(key.slice(slash + 1), key.slice(0, slash));
}
