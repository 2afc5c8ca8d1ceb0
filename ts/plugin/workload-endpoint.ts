// Workload endpoints in the datastore: ADD writes one; DEL removes it, unless it belongs to a newer
// container than the one deleted. What one holds is in ts/model/workload-endpoint.ts.
import { keys } from '../model/keys.ts';
import { networkOf, type WorkloadEndpoint } from '../model/workload-endpoint.ts';
import type { Entry, Store } from '../store/store.ts';
import { retryOnConflict } from '../store/store.ts';

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
