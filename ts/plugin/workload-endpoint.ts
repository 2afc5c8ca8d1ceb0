// Workload endpoints: what the policy agent reads to program policy for a workload's interface.
// ADD writes one; DEL removes it, unless it belongs to a newer container than the one deleted.
import { API_VERSION, keys } from '../model/keys.ts';
import type { Entry, Store } from '../store/store.ts';
import { retryOnConflict } from '../store/store.ts';

export interface WorkloadEndpointSpec {
  orchestrator: string;
  workload: string;
  node: string;
  containerID: string;
  pod: string;
  endpoint: string;
  serviceAccountName?: string;
  interfaceName: string;
  mac: string;
  ipNetworks: string[];
  profiles: string[];
  ports?: Array<{ name: string; protocol: string; port: number }>;
  /** Floating IPs: traffic to `externalIP` is forwarded to `internalIP`. */
  ipNATs?: Array<{ internalIP: string; externalIP: string }>;
}

export interface WorkloadEndpoint {
  kind: 'WorkloadEndpoint';
  apiVersion: string;
  metadata: { name: string; namespace: string; labels: Record<string, string>; creationTimestamp: string; generateName?: string };
  spec: WorkloadEndpointSpec;
}

/** `<node>-<orchestrator>-<workload>-<endpoint>`, each part's dashes doubled (the reference's names). */
export function workloadEndpointName(node: string, orchestrator: string, workload: string, endpoint: string): string {
  return [node, orchestrator, workload, endpoint].map((part) => part.replaceAll('-', '--')).join('-');
}

export function workloadEndpoint(
  namespace: string,
  spec: WorkloadEndpointSpec,
  labels: Record<string, string> = {},
  generateName?: string,
): WorkloadEndpoint {
  return {
    kind: 'WorkloadEndpoint',
    apiVersion: API_VERSION,
    metadata: {
      name: workloadEndpointName(spec.node, spec.orchestrator, spec.orchestrator === 'k8s' ? spec.pod : spec.workload, spec.endpoint),
      namespace,
      labels: { ...labels, 'projectnet.org/namespace': namespace, 'projectnet.org/orchestrator': spec.orchestrator },
      creationTimestamp: new Date().toISOString(),
      ...(generateName ? { generateName } : {}),
    },
    spec,
  };
}

export async function writeWorkloadEndpoint(store: Store, endpoint: WorkloadEndpoint): Promise<void> {
  const key = keys.workloadEndpoint(endpoint.metadata.namespace, endpoint.metadata.name);
  // Usually the endpoint is new: one round trip. An existing one (a repeated ADD) is updated.
  if (await store.commit([{ key, create: endpoint }])) return;
  await retryOnConflict(`writing workload endpoint ${endpoint.metadata.namespace}/${endpoint.metadata.name}`, async () => {
    const current = await store.get<WorkloadEndpoint>(key);
    const value = current
      ? { ...endpoint, metadata: { ...endpoint.metadata, creationTimestamp: current.value.metadata.creationTimestamp } }
      : endpoint;
    return (await store.commit([current ? { key, update: value, revision: current.revision } : { key, create: value }])) || undefined;
  });
}

/**
 * Removes the endpoint if it is the container's: a DEL for a stale container (an older sandbox of
 * the same pod) leaves the current one alone.
 */
export async function deleteWorkloadEndpoint(
  store: Store,
  namespace: string,
  name: string,
  containerId: string,
  /** The endpoint as the caller last wrote it (a resident agent): the first attempt is not read. */
  written?: Entry<WorkloadEndpoint>,
): Promise<'removed' | 'absent' | 'kept'> {
  const key = keys.workloadEndpoint(namespace, name);
  let known = written;
  return retryOnConflict(`removing workload endpoint ${namespace}/${name}`, async () => {
    // Only the remove is tried on what the caller wrote: if that was another container's, read.
    const current = known?.value.spec.containerID === containerId ? known : await store.get<WorkloadEndpoint>(key);
    known = undefined;
    if (!current) return 'absent';
    if (current.value.spec.containerID && current.value.spec.containerID !== containerId) return 'kept';
    return (await store.commit([{ key, remove: true, revision: current.revision }])) ? 'removed' : undefined;
  });
}

/** Endpoints of this node and network whose container is not among `valid` (CNI GC). */
export async function staleWorkloadEndpoints(
  store: Store,
  node: string,
  network: string,
  valid: ReadonlySet<string>,
): Promise<WorkloadEndpoint[]> {
  return (await store.list<WorkloadEndpoint>(keys.workloadEndpoints))
    .map((entry) => entry.value)
    .filter(({ metadata, spec }) => spec.node === node && networkOf(metadata.labels, spec) === network && !valid.has(spec.containerID));
}

/** The network an endpoint belongs to: its label (netplug writes one), else its profile outside Kubernetes. */
function networkOf(labels: Record<string, string>, spec: WorkloadEndpointSpec): string | undefined {
  return labels['projectnet.org/network'] ?? (spec.orchestrator === 'cni' ? spec.profiles[0] : undefined);
}
