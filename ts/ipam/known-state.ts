// What an allocation starts from: the reads of its first attempt (the handle, the node's
// affinities, the companions), and the blocks they name, as allocate() takes them (KnownState), so
// that a caller can batch them with its own reads or know them already; and the addresses a handle
// holds.
import type { Entry, Read, Store } from '../store/store.ts';
import type { Family } from '../net/cidr.ts';
import type { Allocation } from './assignment.ts';
import type { NodeFacts } from './known-nodes.ts';
import { addressOf, attributeAt, ordinalsOf } from './block.ts';
import { cidrOfKey, familyOf, keys } from '../model/keys.ts';
import type { Block, Handle, PendingRequest } from '../model/ipam-documents.ts';
import { checkedBlock, checkedHandle, checkedOrAbsent } from '../model/checked-documents.ts';

/** What the caller already read, to spare the first attempt those round trips. */
export interface KnownState {
  /** The handle's entry; null when it is known not to exist. */
  handle?: Entry<Handle> | null;
  /** The keys of the node's affinities, per family. */
  affinityKeys?: Partial<Record<Family, string[]>>;
  /** The companions' entries (null: known absent), by key. */
  companions?: Record<string, Entry<unknown> | null>;
  /** Blocks by CIDR (null: known absent): those the node's affinities name. */
  blocks?: Record<string, Entry<Block> | null>;
  /** The node's pending requests. */
  pending?: Entry<PendingRequest>[];
  /** The addresses the handle holds for this interface: known when another ADD's commit has just allocated them. */
  held?: Allocation[];
}

/** The reads that give `allocate` its KnownState, for a caller that batches them with its own. */
export function firstReads(handle: string, node: string, families: readonly Family[], companionKeys: readonly string[]): Read[] {
  return [
    { get: keys.handle(handle) },
    ...families.map((family) => ({ keys: keys.affinities(node, family) })),
    ...companionKeys.map((key) => ({ get: key })),
  ];
}

export function knownFrom(
  results: readonly unknown[],
  families: readonly Family[],
  companionKeys: readonly string[],
  blocks?: KnownState['blocks'],
): KnownState {
  const [handle, ...rest] = results;
  return {
    handle: checkedOrAbsent(checkedHandle, handle as Entry<unknown> | undefined) ?? null,
    affinityKeys: Object.fromEntries(families.map((family, i) => [family, rest[i] as string[]])),
    companions: Object.fromEntries(companionKeys.map((key, i) => [key, (rest[families.length + i] as Entry<unknown> | undefined) ?? null])),
    ...(blocks ? { blocks } : {}),
  };
}

/** The CIDRs of the blocks the affinity keys among `results` (as firstReads() lays them out) name. */
export function affineCidrs(results: readonly unknown[], families: readonly Family[]): string[] {
  return (results.slice(1, 1 + families.length) as string[][]).flat().map(cidrOfKey);
}

/** The reads of the blocks `cidrs`. */
export const blockReads = (cidrs: readonly string[]): Read[] => cidrs.map((cidr) => ({ get: keys.block(cidr) }));

/** The blocks `cidrs` by CIDR (null: absent) from the results of blockReads(cidrs). */
export function blocksFrom(cidrs: readonly string[], entries: readonly unknown[]): Record<string, Entry<Block> | null> {
  return Object.fromEntries(
    cidrs.map((cidr, i) => [cidr, checkedOrAbsent(checkedBlock, entries[i] as Entry<unknown> | undefined) ?? null]),
  );
}

/** The addresses `handle` holds, in the order of its blocks. */
export async function addressesOf(store: Store, handle: string, handleEntry?: Entry<Handle>): Promise<Allocation[]> {
  const entry = handleEntry ?? checkedOrAbsent(checkedHandle, await store.get(keys.handle(handle)));
  if (!entry) return [];
  const cidrs = Object.keys(entry.value.block);
  const blocks = (cidrs.length > 0 ? await store.read(cidrs.map((cidr) => ({ get: keys.block(cidr) }))) : []) as (
    | Entry<unknown>
    | undefined
  )[];
  return blocks.flatMap((blockEntry) => {
    const block = checkedOrAbsent(checkedBlock, blockEntry)?.value;
    if (!block) return [];
    return ordinalsOf(block, handle).map((ordinal) => {
      const ifname = attributeAt(block, ordinal)?.secondary['ifname'];
      return { address: addressOf(block, ordinal), family: familyOf(block.cidr), block: block.cidr, ...(ifname ? { ifname } : {}) };
    });
  });
}

/** What the agent knows of the node's affinities and blocks, as allocate() takes it (blocks' revisions are its conditions). */
export function nodeState(facts: NodeFacts | undefined, families: readonly Family[]): KnownState {
  if (!facts || families.some((family) => !facts.affinityKeys[family])) return {};
  return { affinityKeys: facts.affinityKeys, blocks: facts.blocks };
}

/** The part of an ADD's first reads that only this attachment's own commands change. */
export const ownState = ({ handle, companions }: KnownState): KnownState => ({
  ...(handle !== undefined ? { handle } : {}),
  ...(companions ? { companions } : {}),
});
