// What address management stores: blocks of a pool with their allocations, the handles that hold
// addresses, the affinities of blocks to nodes, and requests waiting for a node's block. Where
// each lives is in keys.ts; the operations on a block are address management's (ts/ipam/block.ts).
import type { Family } from '../net/cidr.ts';

/** Who holds an address: the handle, and where and when it was taken. */
export interface AllocationAttribute {
  handle_id: string;
  secondary: Record<string, string>;
}

/** A block of a pool, affine to the node that claimed it. */
export interface Block {
  cidr: string;
  /** `host:<node>`, or null once no node owns it. */
  affinity: string | null;
  affinityClaimTime?: string;
  /** Per ordinal: an index into `attributes`, or null when free. */
  allocations: (number | null)[];
  /** Free ordinals in the order they are handed out; released ones go to the back. */
  unallocated: number[];
  attributes: AllocationAttribute[];
  sequenceNumber: number;
  deleted: boolean;
}

/** The blocks a handle (`<network>.<container ID>`) holds addresses in, with how many. */
export interface Handle {
  handleID: string;
  block: Record<string, number>;
  deleted: boolean;
}

/**
 * An ADD that lost the race for its node's block, waiting for the next winner to allocate for it
 * too (one commit then serves many: a burst of pods on a node does not queue behind one key).
 */
export interface PendingRequest {
  handle: string;
  attributes: Record<string, string>;
  requests: { family: Family; pools: string[] }[];
  created: string;
}

export interface Affinity {
  state: 'confirmed';
  deleted: boolean;
}
