// IP pools, and which of them an allocation may use: those a netconf (or, later, an annotation)
// names, by name or exact CIDR, else every enabled pool whose node selector matches the node.
import type { Entry, Store } from '../store/store.ts';
import { formatPrefix, parsePrefix, within, type Family, type Prefix } from '../net/cidr.ts';
import { poolError } from './errors.ts';
import { keys } from '../model/keys.ts';
import type { NodeResource } from '../model/node.ts';
import type { PoolResource, PoolSpec } from '../model/ip-pool.ts';
import { checkedPool } from '../model/checked-documents.ts';
import { matches } from '../selectors/evaluate.ts';
import { parseSelector } from '../selectors/parse.ts';
import type { Labels } from '../selectors/syntax.ts';

export interface Pool {
  name: string;
  spec: PoolSpec;
  prefix: Prefix;
}

export const familyName = (family: Family) => (family === 4 ? 'IPv4' : 'IPv6');

/** Whether the block `cidr` is one of the pool's. */
export function blockInPool(cidr: string, pool: Pool): boolean {
  const block = parsePrefix(cidr);
  return block !== undefined && within(block, pool.prefix);
}

export async function listPools(store: Store): Promise<Pool[]> {
  return poolsOf(await store.list<PoolResource>(keys.pools));
}

/** The pools in the entries under `keys.pools`, by name; a broken one is an error naming it. */
export function poolsOf(entries: readonly Entry<unknown>[]): Pool[] {
  return (
    entries
      .map((entry) => poolOf(checkedPool(entry).value))
      // By code point: localeCompare would load ICU's collation data, milliseconds on every ADD.
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  );
}

/** A checked pool resource as the allocator uses it. */
export const poolOf = (value: PoolResource): Pool => ({
  name: value.metadata.name,
  spec: value.spec,
  prefix: parsePrefix(value.spec.cidr) as Prefix,
});

/** The node's labels; a node nobody registered has none. */
export async function nodeLabels(store: Store, node: string): Promise<Labels> {
  return (await store.get<NodeResource>(keys.node(node)))?.value.metadata.labels ?? {};
}

/**
 * The pools a `family` address may come from. `requested` (by name or exact CIDR, from `field`)
 * wins over node selectors; each must exist, be of the family and enabled, and a CIDR must be a
 * pool's own, not a part of one.
 */
export function choosePools(
  all: readonly Pool[],
  family: Family,
  requested: readonly string[] | undefined,
  labels: Labels,
  field: string,
): Pool[] {
  if (requested && requested.length > 0) return requested.map((item) => requestedPool(all, family, item, field));
  const selected = all.filter(
    (pool) => pool.prefix.family === family && !pool.spec.disabled && matches(parseSelector(pool.spec.nodeSelector), labels),
  );
  return selected;
}

function requestedPool(all: readonly Pool[], family: Family, item: string, field: string): Pool {
  const asCidr = parsePrefix(item);
  const pool = asCidr
    ? all.find((p) => p.prefix.family === asCidr.family && p.prefix.base === asCidr.base && p.prefix.length === asCidr.length)
    : all.find((p) => p.name === item);
  if (!pool) {
    const container = asCidr && all.find((p) => within(asCidr, p.prefix));
    if (container) {
      throw poolError(`${field}: ${item} lies within pool "${container.name}" (${container.spec.cidr}); name a pool, or its exact CIDR`);
    }
    throw poolError(`${field}: ${asCidr ? `no pool has the CIDR ${formatPrefix(asCidr)}` : `pool "${item}" does not exist`}`);
  }
  if (pool.prefix.family !== family) {
    throw poolError(`${field}: pool "${pool.name}" (${pool.spec.cidr}) is ${familyName(pool.prefix.family)}, not ${familyName(family)}`);
  }
  if (pool.spec.disabled) throw poolError(`${field}: pool "${pool.name}" (${pool.spec.cidr}) is disabled`);
  return pool;
}
