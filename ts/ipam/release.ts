// Releasing addresses: by handle on DEL (optionally only some of its addresses), and one address
// whoever holds it (the repair tool). Blocks are written before the handle, so that a datastore
// applying the writes one by one never leaves a handle pointing at a freed address.
import type { Entry, Store, Write } from '../store/store.ts';
import { retryOnConflict } from '../store/store.ts';
import { addressOf, attributeAt, ordinalOf, ordinalsOf, releaseOrdinals } from './block.ts';
import { contains, parseIp, parsePrefix, type Prefix } from '../net/cidr.ts';
import { poolError } from './errors.ts';
import type { Alongside } from './ipam.ts';
import { cidrOfKey, keys } from '../model/keys.ts';
import type { AllocationAttribute, Handle } from '../model/ipam-documents.ts';
import { checkedBlock, checkedHandle, checkedOrAbsent } from '../model/checked-documents.ts';

/** Releases every address of the handle; what was already released is fine. */
export function releaseHandle(store: Store, handle: string): Promise<string[]> {
  return releaseWhere(store, handle, () => true);
}

/** What a caller already read for a release (a resident agent, early): the handle, and blocks by CIDR. */
export interface ReadForRelease {
  handle: Entry<unknown> | undefined;
  blocks: Record<string, Entry<unknown> | undefined>;
}

/**
 * Releases the handle's addresses whose allocation satisfies `which`, and drops the handle once it
 * holds none. Released addresses join the back of their block's queue. Nothing is written before
 * `notBefore` settles; the reads go ahead. `known` (with the handle) spares the first attempt its
 * reads (blocks of the handle it lacks are read); the commit's conditions catch what changed since.
 * `alongside` goes with the first commit only (see Alongside).
 */
export async function releaseWhere(
  store: Store,
  handle: string,
  which: (attribute: AllocationAttribute, address: string) => boolean,
  notBefore?: Promise<unknown>,
  known?: ReadForRelease,
  committed?: (writes: readonly Write[], revisions: Record<string, string>) => void,
  alongside?: Alongside,
): Promise<string[]> {
  // A handle known absent is read again: an ADD of this container may have committed since.
  let given = known?.handle ? known : undefined;
  let along = alongside;
  return retryOnConflict(`releasing the addresses of ${handle}`, async () => {
    const first = given;
    given = undefined;
    const withThis = along;
    along = undefined;
    const handleEntry = checkedOrAbsent(checkedHandle, first ? first.handle : await store.get<unknown>(keys.handle(handle)));
    if (!handleEntry) return [];
    const cidrs = Object.keys(handleEntry.value.block);
    const read = (
      first && cidrs.every((cidr) => cidr in first.blocks)
        ? cidrs.map((cidr) => first.blocks[cidr])
        : cidrs.length > 0
          ? await store.read(cidrs.map((cidr) => ({ get: keys.block(cidr) })))
          : []
    ) as (Entry<unknown> | undefined)[];
    const entries = read.map((entry) => checkedOrAbsent(checkedBlock, entry));
    const released: string[] = [];
    const blockWrites: Write[] = [];
    const remaining: Handle = { ...handleEntry.value, block: {} };
    for (const [index, cidr] of cidrs.entries()) {
      const entry = entries[index];
      if (!entry) continue;
      const block = entry.value;
      const ordinals = ordinalsOf(block, handle).filter((ordinal) =>
        which(attributeAt(block, ordinal) as AllocationAttribute, addressOf(block, ordinal)),
      );
      released.push(...ordinals.map((ordinal) => addressOf(block, ordinal)));
      if (ordinals.length > 0) {
        releaseOrdinals(block, ordinals);
        const empty = block.allocations.every((a) => a === null);
        blockWrites.push(
          empty && block.affinity === null
            ? { key: entry.key, remove: true, revision: entry.revision }
            : { key: entry.key, update: block, revision: entry.revision },
        );
      }
      const left = ordinalsOf(block, handle).length;
      if (left > 0) remaining.block[cidr] = left;
    }
    // Nothing to release and the handle as it is: nothing is written (GC and a repeated DEL leave
    // the datastore, and whoever is writing it, alone).
    if (released.length === 0 && sameCounts(remaining.block, handleEntry.value.block)) return [];
    const handleWrite: Write =
      Object.keys(remaining.block).length === 0
        ? { key: handleEntry.key, remove: true, revision: handleEntry.revision }
        : { key: handleEntry.key, update: remaining, revision: handleEntry.revision };
    await notBefore;
    const writes = [...blockWrites, handleWrite, ...(withThis?.writes ?? [])];
    const outcome = await store.commitElseRead(writes, []);
    if (!outcome.committed) return undefined;
    committed?.(writes, outcome.revisions);
    withThis?.committed();
    return released;
  });
}

/**
 * Withdraws the request an ADD of `handle` left waiting on `node` (pending requests: datastores
 * with transactions only). An ADD killed while it waited leaves its request behind, and another
 * ADD's commit would then allocate addresses for a container that is gone. A commit that serves
 * the request removes it at the revision it read, so once this has run either no such commit
 * will land, or the one that landed created the handle, which a release read afterwards finds.
 * Returns whether a request was there.
 */
export async function withdrawPendingRequest(store: Store, node: string, handle: string): Promise<boolean> {
  const key = keys.pendingRequest(node, handle);
  const entry = await store.get(key);
  if (!entry) return false;
  await store.commit([{ key, remove: true, revision: entry.revision }]);
  return true;
}

function sameCounts(a: Record<string, number>, b: Record<string, number>): boolean {
  const entries = Object.entries(a);
  return entries.length === Object.keys(b).length && entries.every(([cidr, count]) => b[cidr] === count);
}

/**
 * Releases one address, whoever holds it (netplugctl ipam release): the repair tool, so it works
 * also when the holder's handle is missing. Returns the holder, or undefined if it was free.
 * `holds`, when given, must accept the holder as it stands at the write (netplug-kube-controllers
 * releases what it judged leaked, never an address handed out again since): else nothing is
 * written and undefined is returned.
 */
export async function releaseAddress(
  store: Store,
  ip: string,
  holds?: (holder: AllocationAttribute) => boolean,
): Promise<AllocationAttribute | undefined> {
  const parsed = parseIp(ip);
  if (!parsed) throw poolError(`${ip} is not an IP address`);
  const cidr = (await store.listKeys(keys.blocks(parsed.family)))
    .map(cidrOfKey)
    .find((c) => contains(parsePrefix(c) as Prefix, parsed.family, parsed.value));
  if (!cidr) return undefined;
  return retryOnConflict(`releasing ${ip}`, async () => {
    const entry = checkedOrAbsent(checkedBlock, await store.get<unknown>(keys.block(cidr)));
    const ordinal = entry && ordinalOf(entry.value, ip);
    const holder = entry && ordinal !== undefined ? attributeAt(entry.value, ordinal) : undefined;
    if (!entry || ordinal === undefined || !holder || (holds && !holds(holder))) return { holder: undefined };
    releaseOrdinals(entry.value, [ordinal]);
    const handleEntry = await store.get<Handle>(keys.handle(holder.handle_id));
    const commit: Write[] = [{ key: entry.key, update: entry.value, revision: entry.revision }];
    if (handleEntry) {
      const left = ordinalsOf(entry.value, holder.handle_id).length;
      const block = { ...handleEntry.value.block, [cidr]: left };
      if (left === 0) delete block[cidr];
      commit.push(
        Object.keys(block).length === 0
          ? { key: handleEntry.key, remove: true, revision: handleEntry.revision }
          : { key: handleEntry.key, update: { ...handleEntry.value, block }, revision: handleEntry.revision },
      );
    }
    return (await store.commit(commit)) ? { holder } : undefined;
  }).then((result) => result.holder);
}
