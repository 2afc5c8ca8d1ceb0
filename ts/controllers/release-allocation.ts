// Releasing one address whose pod is gone: the workload endpoint ADD wrote for it first (a stale
// endpoint naming an address handed out again would give policy two owners of one address), then
// the address and its handle with the release netplugctl ipam release uses, but only while the
// same handle still holds it (never an address handed out again since it was judged leaked).
import { keys } from '../model/keys.ts';
import { releaseAddress } from '../ipam/release.ts';
import { retryOnConflict, type Store } from '../store/store.ts';
import type { Allocated } from './read-allocations.ts';

/** Whether the address was released (false: someone else released or reallocated it first). */
export async function releaseAllocation(store: Store, allocation: Allocated): Promise<{ released: boolean; endpoint?: string }> {
  const endpoint = allocation.endpoint ? await removeEndpoint(store, allocation) : undefined;
  const holder = await releaseAddress(store, allocation.address, (h) => h.handle_id === allocation.handle);
  return { released: holder !== undefined, ...(endpoint ? { endpoint } : {}) };
}

/** The container ID in a handle `<network>.<container ID>` (network names may hold dots; container IDs do not). */
const containerOf = (handle: string) => handle.slice(handle.lastIndexOf('.') + 1);

/** Removes the endpoint if it is still the handle's container's; returns its name if removed. */
async function removeEndpoint(store: Store, allocation: Allocated): Promise<string | undefined> {
  const slash = allocation.endpoint?.indexOf('/') ?? -1;
  if (!allocation.endpoint || slash < 0) return undefined;
  const key = keys.workloadEndpoint(allocation.endpoint.slice(0, slash), allocation.endpoint.slice(slash + 1));
  return retryOnConflict(`removing workload endpoint ${allocation.endpoint}`, async () => {
    const entry = await store.get<{ spec?: { containerID?: unknown } }>(key);
    if (!entry || entry.value?.spec?.containerID !== containerOf(allocation.handle)) return { removed: false };
    return (await store.commit([{ key, remove: true, revision: entry.revision }])) ? { removed: true } : undefined;
  }).then(({ removed }) => (removed ? allocation.endpoint : undefined));
}
