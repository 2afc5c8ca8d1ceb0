// netplug's network policy resources (projectnet.org/v3): NetworkPolicy (namespaced) and
// GlobalNetworkPolicy with ordered rules, NetworkSet and GlobalNetworkSet (labelled address sets
// that rule selectors match like pods), Tier (to order policies and name what a tier does when
// none of its policies decided), and Profile (the labels and allow-all rules of a namespace or a
// service account). The same documents live on etcd under the keys below and, on the Kubernetes
// datastore, as the custom resources of deploy/crds/ (profiles excepted: computed there). How a
// document is checked is in policy-schema.ts; what the fields mean for traffic, in ts/policy/.
import { keys } from './keys.ts';

export const ACTIONS = ['Allow', 'Deny', 'Pass', 'Log'] as const;
export type Action = (typeof ACTIONS)[number];

/** Protocols by name, as rules may write them, with their numbers. */
export const PROTOCOL_NUMBERS = { TCP: 6, UDP: 17, ICMP: 1, ICMPv6: 58, SCTP: 132, UDPLite: 136 } as const;
type ProtocolName = keyof typeof PROTOCOL_NUMBERS;
/** A name or a number from 1 to 255. */
export type Protocol = ProtocolName | number;
/** The protocols whose rules may name ports (they have ports at the same place in their header). */
export const PORT_PROTOCOLS: readonly number[] = [6, 17, 132, 136];

/** A port number, a range `"1000:2000"` (inclusive), or a named port (`"http"`) resolved per endpoint. */
type Port = number | string;

export interface IcmpMatch {
  type?: number;
  /** Only with a type. */
  code?: number;
}

export interface ServiceAccountMatch {
  names?: string[];
  /** Matches the service account's labels. */
  selector?: string;
}

/** One end of a rule: every field given must hold. */
export interface EntityRule {
  nets?: string[];
  notNets?: string[];
  selector?: string;
  notSelector?: string;
  /** Matches the namespace's labels; `global()` selects what is in no namespace (global network sets). */
  namespaceSelector?: string;
  serviceAccounts?: ServiceAccountMatch;
  ports?: Port[];
  notPorts?: Port[];
}

export interface PolicyRule {
  action: Action;
  protocol?: Protocol;
  notProtocol?: Protocol;
  ipVersion?: 4 | 6;
  icmp?: IcmpMatch;
  notICMP?: IcmpMatch;
  source?: EntityRule;
  destination?: EntityRule;
  metadata?: { annotations?: Record<string, string> };
}

export const POLICY_TYPES = ['Ingress', 'Egress'] as const;
export type PolicyType = (typeof POLICY_TYPES)[number];

export interface PolicySpec {
  /** Default `default`. */
  tier?: string;
  /** Lower first; absent: after every policy of the tier that has one. */
  order?: number;
  /** Default `all()`. */
  selector?: string;
  /** GlobalNetworkPolicy only: the namespaces (by their labels) whose endpoints it selects. */
  namespaceSelector?: string;
  serviceAccountSelector?: string;
  /** Default: Ingress, and Egress when there are egress rules. */
  types?: PolicyType[];
  ingress?: PolicyRule[];
  egress?: PolicyRule[];
  /**
   * GlobalNetworkPolicy only, for host endpoints: the policy also applies to traffic forwarded
   * through the host endpoint's interface (to or from local workloads, or between interfaces).
   */
  applyOnForward?: boolean;
  /** GlobalNetworkPolicy only: ingress of host endpoints before kube-proxy's DNAT (needs applyOnForward). */
  preDNAT?: boolean;
  /** GlobalNetworkPolicy only: host endpoints' traffic before connection tracking, which what it allows bypasses (needs applyOnForward). */
  doNotTrack?: boolean;
}

interface ResourceMetadata {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  uid?: string;
  creationTimestamp?: string;
  resourceVersion?: string;
}

export interface NetworkPolicyResource {
  kind: 'NetworkPolicy' | 'GlobalNetworkPolicy';
  apiVersion: string;
  metadata: ResourceMetadata;
  spec: PolicySpec;
}

export interface NetworkSetResource {
  kind: 'NetworkSet' | 'GlobalNetworkSet';
  apiVersion: string;
  metadata: ResourceMetadata;
  spec: { nets?: string[] };
}

export const TIER_ACTIONS = ['Deny', 'Pass'] as const;
type TierAction = (typeof TIER_ACTIONS)[number];

export interface TierResource {
  kind: 'Tier';
  apiVersion: string;
  metadata: ResourceMetadata;
  spec: { order?: number; defaultAction?: TierAction };
}

export interface ProfileResource {
  kind: 'Profile';
  apiVersion: string;
  metadata: ResourceMetadata;
  spec: { labelsToApply?: Record<string, string>; ingress?: PolicyRule[]; egress?: PolicyRule[] };
}

export type PolicyResource = NetworkPolicyResource | NetworkSetResource | TierResource | ProfileResource;
export type PolicyKind = PolicyResource['kind'];

export const POLICY_KINDS: readonly PolicyKind[] = [
  'NetworkPolicy',
  'GlobalNetworkPolicy',
  'NetworkSet',
  'GlobalNetworkSet',
  'Tier',
  'Profile',
];
export const NAMESPACED_KINDS: ReadonlySet<PolicyKind> = new Set(['NetworkPolicy', 'NetworkSet']);

/** The tier every policy without one is in; it always exists, whether or not a Tier document names it. */
export const DEFAULT_TIER = 'default';
export const DEFAULT_TIER_ORDER = 1_000_000;
/** Where Kubernetes NetworkPolicies go: tier default, this order, named `knp.default.<name>`. */
export const KUBERNETES_POLICY_ORDER = 1000;
export const KUBERNETES_POLICY_PREFIX = 'knp.default.';

/** The labels netplug gives every workload endpoint, which selectors can match. */
export const ENDPOINT_LABELS = {
  namespace: 'projectnet.org/namespace',
  orchestrator: 'projectnet.org/orchestrator',
  serviceAccount: 'projectnet.org/serviceaccount',
} as const;
/** The label a namespace or service account profile carries its own name in (after its prefix). */
export const NAME_LABEL = 'projectnet.org/name';
/** Namespace labels, as profiles `kns.<namespace>` apply them to endpoints. */
export const NAMESPACE_LABEL_PREFIX = 'pcns.';
/** Service account labels, as profiles `ksa.<namespace>.<name>` apply them to endpoints. */
export const SERVICE_ACCOUNT_LABEL_PREFIX = 'pcsa.';
const NAMESPACE_PROFILE_PREFIX = 'kns.';
const SERVICE_ACCOUNT_PROFILE_PREFIX = 'ksa.';

export const namespaceProfileName = (namespace: string): string => `${NAMESPACE_PROFILE_PREFIX}${namespace}`;
export const serviceAccountProfileName = (namespace: string, serviceAccount: string): string =>
  `${SERVICE_ACCOUNT_PROFILE_PREFIX}${namespace}.${serviceAccount}`;

/** Where a resource lives on etcd (and which custom resource it is on the Kubernetes datastore). */
export function policyResourceKey(kind: PolicyKind, name: string, namespace?: string): string {
  switch (kind) {
    case 'NetworkPolicy':
      return keys.networkPolicy(namespace ?? 'default', name);
    case 'NetworkSet':
      return keys.networkSet(namespace ?? 'default', name);
    case 'GlobalNetworkPolicy':
      return keys.globalNetworkPolicy(name);
    case 'GlobalNetworkSet':
      return keys.globalNetworkSet(name);
    case 'Tier':
      return keys.tier(name);
    case 'Profile':
      return keys.profile(name);
  }
}

/** The prefix every resource of a kind is under (of one namespace, when given). */
export function policyKindPrefix(kind: PolicyKind, namespace?: string): string {
  const prefix = {
    NetworkPolicy: keys.networkPolicies,
    NetworkSet: keys.networkSets,
    GlobalNetworkPolicy: keys.globalNetworkPolicies,
    GlobalNetworkSet: keys.globalNetworkSets,
    Tier: keys.tiers,
    Profile: keys.profiles,
  }[kind];
  return namespace !== undefined && NAMESPACED_KINDS.has(kind) ? `${prefix}${namespace}/` : prefix;
}

/** How messages and sorting name a resource: `<namespace>/<name>` for namespaced kinds, else the name. */
export function resourceName(resource: { metadata: { name: string; namespace?: string } }): string {
  const { name, namespace } = resource.metadata;
  return namespace === undefined ? name : `${namespace}/${name}`;
}
