// The ipam controller: addresses whose pod no longer exists are released after a grace period.
// An address whose allocation names a pod (namespace/name) that the pod cache lacks becomes a
// candidate when first seen so; it is released only if still missing a full grace period later,
// and a fresh GET right before the release still finds no such pod. A pod of that name
// protects the address (allocations record no pod UID, so a pod recreated under the same name
// protects its predecessor's address too: a leak left, never an address taken from a live pod).
// Addresses that name no pod (tunnel addresses, other orchestrators) are not this controller's.
import type { Store } from '../store/store.ts';
import { describeError } from '../runtime/errors.ts';
import type { Log } from '../runtime/log.ts';
import { allocationsIn, readBlocks, type Allocated } from './read-allocations.ts';
import { releaseAllocation } from './release-allocation.ts';

export interface LeakRepair {
  store: Store;
  /** Whether the pod cache holds a complete list, and whether it has the pod. */
  podsSynced(): boolean;
  podCached(namespace: string, name: string): boolean;
  /** A fresh GET: whether the pod exists. */
  podExists(namespace: string, name: string): Promise<boolean>;
  graceMs: number;
  log: Log;
}

/** Candidates by `<handle> <address>`: when each was first seen without its pod. */
export type Candidates = Map<string, number>;

/** Resolves to how soon the next candidate's grace period ends (ms), when one is waiting. */
export async function releaseLeakedAddresses(repair: LeakRepair, candidates: Candidates): Promise<number | undefined> {
  const { store, log, graceMs } = repair;
  if (!repair.podsSynced()) throw new Error('waiting for a complete list of pods');
  const seen = new Set<string>();
  let failure: unknown;
  for (const { value: block } of await readBlocks(store)) {
    for (const allocation of allocationsIn(block)) {
      const { pod } = allocation;
      if (!pod) continue;
      const id = `${allocation.handle} ${allocation.address}`;
      if (repair.podCached(pod.namespace, pod.name)) {
        candidates.delete(id);
        continue;
      }
      seen.add(id);
      const now = Date.now();
      const since = candidates.get(id);
      if (since === undefined) {
        candidates.set(id, now);
        log.info(`${describe(allocation)}: pod not found; released in ${graceMs / 1000} s unless it appears`);
        continue;
      }
      if (now - since < graceMs) continue;
      try {
        await releaseLeak(repair, allocation, candidates, id, now - since);
      } catch (err) {
        // One address that cannot be released now does not hold up the others.
        failure ??= err;
        log.warning(`${describe(allocation)}: release failed, retrying: ${describeError(err)}`);
      }
    }
  }
  for (const id of candidates.keys()) if (!seen.has(id)) candidates.delete(id);
  if (failure) throw failure;
  const now = Date.now();
  const waits = [...candidates.values()].map((since) => Math.max(100, since + graceMs - now));
  return waits.length > 0 ? Math.min(...waits) : undefined;
}

async function releaseLeak(repair: LeakRepair, allocation: Allocated, candidates: Candidates, id: string, missingMs: number) {
  const pod = allocation.pod as { namespace: string; name: string };
  if (await repair.podExists(pod.namespace, pod.name)) {
    candidates.delete(id);
    repair.log.info(`${describe(allocation)}: pod exists after all; kept`);
    return;
  }
  const { released, endpoint } = await releaseAllocation(repair.store, allocation);
  candidates.delete(id);
  if (released)
    repair.log.info(
      `released ${describe(allocation)}${endpoint ? ` and workload endpoint ${endpoint}` : ''}: pod missing for ${Math.round(missingMs / 1000)} s (grace period ${repair.graceMs / 1000} s)`,
    );
}

const describe = (a: Allocated) => `${a.address} of pod ${a.pod?.namespace}/${a.pod?.name} (handle ${a.handle})`;
