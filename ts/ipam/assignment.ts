// What an allocation is asked for and what it yields: shared by the allocator (allocator.ts), one
// attempt's plan (plan.ts) and the callers.
import type { Family } from '../net/cidr.ts';
import type { Entry, Store, Write } from '../store/store.ts';
import type { Pool } from './pools.ts';

export interface Allocation {
  address: string;
  family: Family;
  /** The CIDR of the block it came from; its prefix length is what delegating plugins get. */
  block: string;
  /** The interface it was allocated for (a handle is a container; it may have several). */
  ifname?: string;
}

export interface Assignment {
  store: Store;
  handle: string;
  node: string;
  /** Recorded with the address: node, pod, namespace, interface, time. */
  attributes: Record<string, string>;
  now?: Date;
}

/** One address to allocate: any of the family from `pools`, or exactly `ip` (which must lie in one). */
export type AddressRequest = { family: Family; pools: readonly Pool[] } | { ip: string; pools: readonly Pool[] };

/** A document the caller commits with the allocation, written whether it exists yet or not. */
export interface Companion {
  key: string;
  /** The document, given the addresses allocated and the document as it stands (if it exists). */
  value(addresses: readonly string[], current: unknown): unknown;
}

/** The write of `companion` for `addresses`: an update of the document as it stands, else its creation. */
export function companionWrite(companion: Companion, addresses: readonly string[], current: Entry<unknown> | undefined): Write {
  const value = companion.value(addresses, current?.value);
  return current ? { key: companion.key, update: value, revision: current.revision } : { key: companion.key, create: value };
}
