// The Kubernetes objects the plugin reads: the pod (labels, annotations, service account, named
// ports), its namespace (labels, annotations) and the node (its pod CIDRs). Each read says what a
// refusal means netplug's identity lacks.
import type { KubeClient } from './client.ts';
import { KubeError } from './client.ts';
import { KubeSettingsError } from './kubeconfig.ts';

interface NamedPort {
  name: string;
  protocol: string;
  port: number;
}

export interface PodInfo {
  namespace: string;
  name: string;
  uid: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  serviceAccount: string;
  ports: NamedPort[];
  generateName?: string;
}

export interface NamespaceInfo {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

interface Metadata {
  name?: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  generateName?: string;
}

export interface Pod {
  metadata?: Metadata;
  spec?: { serviceAccountName?: string; containers?: { ports?: { name?: string; protocol?: string; containerPort?: number }[] }[] };
}

const segment = encodeURIComponent;

export async function readPod(client: KubeClient, namespace: string, name: string): Promise<PodInfo> {
  const pod = await client.get<Pod>(
    `/api/v1/namespaces/${segment(namespace)}/pods/${segment(name)}`,
    'get on pods in all namespaces (policy.type k8s)',
  );
  if (!pod) throw new KubeError(404, `pod ${namespace}/${name} does not exist in the Kubernetes API at ${client.server}`);
  return podInfoOf(namespace, name, pod);
}

/** What the plugin uses of a pod, read by a GET or kept by netplug-node's watch. */
export function podInfoOf(namespace: string, name: string, pod: Pod): PodInfo {
  const metadata = pod.metadata ?? {};
  const ports = (pod.spec?.containers ?? []).flatMap((c) =>
    (c.ports ?? [])
      .filter((p) => p.name && p.containerPort)
      .map((p) => ({ name: p.name as string, protocol: (p.protocol ?? 'TCP').toUpperCase(), port: p.containerPort as number })),
  );
  return {
    namespace,
    name,
    uid: metadata.uid ?? '',
    labels: metadata.labels ?? {},
    annotations: metadata.annotations ?? {},
    serviceAccount: pod.spec?.serviceAccountName ?? 'default',
    ports,
    ...(metadata.generateName ? { generateName: metadata.generateName } : {}),
  };
}

export async function readNamespace(client: KubeClient, name: string): Promise<NamespaceInfo> {
  const namespace = await client.get<{ metadata?: Metadata }>(
    `/api/v1/namespaces/${segment(name)}`,
    'get on namespaces (for their pool annotations)',
  );
  if (!namespace) throw new KubeError(404, `namespace ${name} does not exist in the Kubernetes API at ${client.server}`);
  return namespaceInfoOf(name, namespace);
}

export function namespaceInfoOf(name: string, namespace: { metadata?: Metadata }): NamespaceInfo {
  return { name, labels: namespace.metadata?.labels ?? {}, annotations: namespace.metadata?.annotations ?? {} };
}

/** The node's pod CIDRs (`spec.podCIDRs`, else `spec.podCIDR`). */
export async function nodePodCidrs(client: KubeClient, node: string): Promise<string[]> {
  const found = await client.get<{ spec?: { podCIDR?: string; podCIDRs?: string[] } }>(
    `/api/v1/nodes/${segment(node)}`,
    'get on nodes (for usePodCidr and usePodCidrIPv6)',
  );
  // Most likely a node name that differs from the Node object's: the netconf's to fix.
  if (!found)
    throw new KubeSettingsError(
      'kubernetes.node_name',
      `node ${node} does not exist in the Kubernetes API at ${client.server}; set it to this node's Node object name`,
    );
  return found.spec?.podCIDRs ?? (found.spec?.podCIDR ? [found.spec.podCIDR] : []);
}
