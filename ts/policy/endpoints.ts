// What the policy compiler knows of a workload and of a network set: the labels selectors read
// (its own, netplug's, and those its profiles apply: the namespace's with `pcns.`, the service
// account's with `pcsa.`), its addresses and named ports, and, for a workload on this node, the
// host-side interface its chains are dispatched on.
import {
  ENDPOINT_LABELS,
  NAMESPACE_LABEL_PREFIX,
  SERVICE_ACCOUNT_LABEL_PREFIX,
  namespaceProfileName,
  serviceAccountProfileName,
  type NetworkSetResource,
} from '../model/policy.ts';
import type { HostEndpoint } from '../model/host-endpoint.ts';
import type { WorkloadEndpoint } from '../model/workload-endpoint.ts';
import type { Labels } from '../selectors/syntax.ts';
import { fitted } from './fitted.ts';

export interface NamedPort {
  name: string;
  /** TCP, UDP or SCTP (Kubernetes' container port protocols). */
  protocol: string;
  port: number;
}

/** A workload endpoint (a pod's interface), on this node or another. */
export interface EndpointInput {
  /** Unique among endpoints: `<namespace>/<pod>` for a pod's one interface. */
  key: string;
  namespace: string;
  /** The pod's name. */
  name: string;
  /** The pod's own labels (netplug's projectnet.org/* labels are added). */
  labels: Labels;
  serviceAccount?: string;
  /** Its addresses (`10.65.0.5` or `10.65.0.5/32`). */
  addresses: readonly string[];
  ports?: readonly NamedPort[];
  node: string;
  /** The host side of its interface: set for the endpoints of this node, whose chains are programmed. */
  interfaceName?: string;
  /** Default `kns.<namespace>` and `ksa.<namespace>.<serviceaccount>`. */
  profiles?: readonly string[];
  /** Default `k8s`. */
  orchestrator?: string;
}

const DEFAULT_SERVICE_ACCOUNT = 'default';

/** The profiles of an endpoint that names none: its namespace's and its service account's. */
export function profilesOf(endpoint: Pick<EndpointInput, 'namespace' | 'serviceAccount' | 'profiles'>): readonly string[] {
  return (
    endpoint.profiles ?? [
      namespaceProfileName(endpoint.namespace),
      serviceAccountProfileName(endpoint.namespace, endpoint.serviceAccount ?? DEFAULT_SERVICE_ACCOUNT),
    ]
  );
}

/**
 * The labels selectors match an endpoint by: its own, then its profiles' (namespace and service
 * account labels), then netplug's. A pod's own label cannot pose as its namespace's or service
 * account's (`pcns.*`, `pcsa.*`) or as netplug's: whoever may label a pod must not be able to
 * put it in another namespace's selectors.
 */
export function endpointLabels(endpoint: EndpointInput, profileLabels: (profile: string) => Labels | undefined): Labels {
  const labels: Record<string, string> = ownLabels(endpoint.labels);
  for (const profile of profilesOf(endpoint)) Object.assign(labels, profileLabels(profile));
  labels[ENDPOINT_LABELS.namespace] = endpoint.namespace;
  labels[ENDPOINT_LABELS.orchestrator] = endpoint.orchestrator ?? 'k8s';
  if (endpoint.serviceAccount !== undefined) labels[ENDPOINT_LABELS.serviceAccount] = endpoint.serviceAccount;
  else delete labels[ENDPOINT_LABELS.serviceAccount];
  return labels;
}

const RESERVED = [NAMESPACE_LABEL_PREFIX, SERVICE_ACCOUNT_LABEL_PREFIX];

function ownLabels(labels: Labels): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) if (!RESERVED.some((prefix) => key.startsWith(prefix))) out[key] = value;
  return out;
}

/** The labels of a network set: a namespaced one carries its namespace's, as a pod would. */
export function networkSetLabels(set: NetworkSetResource, profileLabels: (profile: string) => Labels | undefined): Labels {
  const namespace = set.kind === 'NetworkSet' ? (set.metadata.namespace ?? 'default') : undefined;
  const own = ownLabels(set.metadata.labels ?? {});
  delete own[ENDPOINT_LABELS.namespace];
  if (namespace === undefined) return own;
  return { ...own, ...profileLabels(namespaceProfileName(namespace)), [ENDPOINT_LABELS.namespace]: namespace };
}

export const networkSetKey = (set: NetworkSetResource): string =>
  set.kind === 'NetworkSet'
    ? `NetworkSet/${set.metadata.namespace ?? 'default'}/${set.metadata.name}`
    : `GlobalNetworkSet/${set.metadata.name}`;

/** An endpoint from a workload endpoint document (the etcd datastore's, written by the plugin). */
export function endpointOfWorkload(endpoint: WorkloadEndpoint): EndpointInput {
  const { metadata, spec } = endpoint;
  return {
    key: `${metadata.namespace}/${spec.pod || spec.workload}`,
    namespace: metadata.namespace,
    name: spec.pod || spec.workload,
    labels: metadata.labels ?? {},
    ...(spec.serviceAccountName ? { serviceAccount: spec.serviceAccountName } : {}),
    addresses: spec.ipNetworks,
    ports: (spec.ports ?? []).map((p) => ({ name: p.name, protocol: p.protocol.toUpperCase(), port: p.port })),
    node: spec.node,
    interfaceName: spec.interfaceName,
    profiles: spec.profiles,
    orchestrator: spec.orchestrator,
  };
}

/** A pod as the Kubernetes API gives it: what an endpoint is made of (no import of client-node here). */
export interface KubePod {
  metadata: { name: string; namespace?: string; labels?: Record<string, string> | null };
  spec?: {
    nodeName?: string;
    hostNetwork?: boolean;
    serviceAccountName?: string;
    containers?: { ports?: { name?: string; protocol?: string; containerPort?: number }[] | null }[];
  };
  status?: { podIP?: string; podIPs?: { ip: string }[] | null };
}

/**
 * The endpoint of a pod (`interfaceName`: its host-side interface, for a pod of this node), or
 * undefined for a pod on the host's network, which is no workload endpoint.
 */
export function endpointOfPod(pod: KubePod, interfaceName?: string): EndpointInput | undefined {
  if (pod.spec?.hostNetwork) return undefined;
  const namespace = pod.metadata.namespace ?? 'default';
  const name = pod.metadata.name;
  const ports = (pod.spec?.containers ?? []).flatMap((c) =>
    (c.ports ?? []).flatMap((p) =>
      p.name && p.containerPort ? [{ name: p.name, protocol: (p.protocol ?? 'TCP').toUpperCase(), port: p.containerPort }] : [],
    ),
  );
  return {
    key: `${namespace}/${name}`,
    namespace,
    name,
    labels: pod.metadata.labels ?? {},
    serviceAccount: pod.spec?.serviceAccountName ?? DEFAULT_SERVICE_ACCOUNT,
    addresses: pod.status?.podIPs?.map((p) => p.ip) ?? (pod.status?.podIP ? [pod.status.podIP] : []),
    ports: fitted(ports),
    node: pod.spec?.nodeName ?? '',
    ...(interfaceName !== undefined ? { interfaceName } : {}),
  };
}

/** A host endpoint: a node's interface (or all of them, `*`) that policies select like a pod. */
export interface HostEndpointInput {
  name: string;
  node: string;
  /** An interface name, or `*` for all but workloads' and loopback; absent: none programmed. */
  interfaceName?: string;
  /** Its addresses, for rule selectors that match it as a peer. */
  expectedIPs: readonly string[];
  labels: Labels;
  /** Only those it names (no namespace's). */
  profiles: readonly string[];
  ports?: readonly NamedPort[];
}

/** The labels of a host endpoint: its own, then its profiles'; none of netplug's (it is in no namespace). */
export function hostEndpointLabels(endpoint: HostEndpointInput, profileLabels: (profile: string) => Labels | undefined): Labels {
  const labels = ownLabels(endpoint.labels);
  delete labels[ENDPOINT_LABELS.namespace];
  for (const profile of endpoint.profiles) Object.assign(labels, profileLabels(profile));
  return labels;
}

/** A host endpoint from its document (both datastores keep the same one). */
export function endpointOfHostEndpoint(endpoint: HostEndpoint): HostEndpointInput {
  const { metadata, spec } = endpoint;
  return {
    name: metadata.name,
    node: spec.node ?? '',
    ...(spec.interfaceName ? { interfaceName: spec.interfaceName } : {}),
    expectedIPs: spec.expectedIPs ?? [],
    labels: metadata.labels ?? {},
    profiles: spec.profiles ?? [],
    ports: (spec.ports ?? []).map((p) => ({ name: p.name, protocol: p.protocol, port: p.port })),
  };
}
