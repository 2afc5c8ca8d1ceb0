// Operations on one block's allocation state. Pure: they change the object given; the caller
// writes it back with compare-and-swap.
import { formatIp, parseIp, widthOf } from '../net/cidr.ts';
import type { AllocationAttribute, Block } from '../model/ipam-documents.ts';
import { prefixOf } from '../model/keys.ts';

export function newBlock(cidr: string, affinity: string | null, now: Date): Block {
  const prefix = prefixOf(cidr);
  const count = 2 ** (widthOf(prefix.family) - prefix.length);
  return {
    cidr,
    affinity,
    ...(affinity ? { affinityClaimTime: now.toISOString() } : {}),
    allocations: Array<null>(count).fill(null),
    unallocated: Array.from({ length: count }, (_, i) => i),
    attributes: [],
    sequenceNumber: 0,
    deleted: false,
  };
}

export function addressOf(block: Block, ordinal: number): string {
  const prefix = prefixOf(block.cidr);
  return formatIp(prefix.family, prefix.base + BigInt(ordinal));
}

/** The ordinal of `ip` in the block, or undefined if it lies outside. */
export function ordinalOf(block: Block, ip: string): number | undefined {
  const prefix = prefixOf(block.cidr);
  const parsed = parseIp(ip);
  if (!parsed || parsed.family !== prefix.family) return undefined;
  const ordinal = parsed.value - prefix.base;
  return ordinal >= 0n && ordinal < BigInt(block.allocations.length) ? Number(ordinal) : undefined;
}

export function attributeAt(block: Block, ordinal: number): AllocationAttribute | undefined {
  const index = block.allocations[ordinal];
  return index === null || index === undefined ? undefined : block.attributes[index];
}

/** The ordinals held by `handle`. */
export function ordinalsOf(block: Block, handle: string): number[] {
  return block.allocations.flatMap((_, ordinal) => (attributeAt(block, ordinal)?.handle_id === handle ? [ordinal] : []));
}

export const allocatedCount = (block: Block): number => block.allocations.filter((a) => a !== null).length;

/** Hands out the next free ordinal (the head of the queue) to `attribute`; undefined if full. */
export function assignNext(block: Block, attribute: AllocationAttribute): number | undefined {
  const ordinal = block.unallocated[0];
  if (ordinal === undefined) return undefined;
  assignOrdinal(block, ordinal, attribute);
  return ordinal;
}

/** Hands out a given ordinal; false if it is not free. */
export function assignOrdinal(block: Block, ordinal: number, attribute: AllocationAttribute): boolean {
  const queued = block.unallocated.indexOf(ordinal);
  if (queued < 0 || block.allocations[ordinal] !== null) return false;
  block.unallocated.splice(queued, 1);
  block.allocations[ordinal] = attributeIndex(block, attribute);
  block.sequenceNumber++;
  return true;
}

/** Frees the given ordinals: they join the back of the queue, so they are the last handed out again. */
export function releaseOrdinals(block: Block, ordinals: readonly number[]): void {
  for (const ordinal of ordinals) {
    if (block.allocations[ordinal] === null || block.allocations[ordinal] === undefined) continue;
    block.allocations[ordinal] = null;
    block.unallocated.push(ordinal);
  }
  compactAttributes(block);
  block.sequenceNumber++;
}

/** Identical attributes are stored once, as the reference does. */
function attributeIndex(block: Block, attribute: AllocationAttribute): number {
  const same = block.attributes.findIndex(
    (a) => a.handle_id === attribute.handle_id && JSON.stringify(a.secondary) === JSON.stringify(attribute.secondary),
  );
  if (same >= 0) return same;
  block.attributes.push(attribute);
  return block.attributes.length - 1;
}

/** Drops attributes no ordinal refers to any more, renumbering the rest. */
function compactAttributes(block: Block): void {
  const used = [...new Set(block.allocations.filter((a): a is number => a !== null))].sort((a, b) => a - b);
  const renumber = new Map(used.map((old, index) => [old, index]));
  block.attributes = used.map((old) => block.attributes[old] as AllocationAttribute);
  block.allocations = block.allocations.map((a) => (a === null ? null : (renumber.get(a) ?? null)));
}
