// The Installation's IP pools, before the components: each listed pool created, or adopted when a
// pool with its CIDR already says what it asks (the fields it sets, not whole objects), or
// refused when such a pool is not the operator's and differs. A pool the operator made and the
// Installation no longer lists is disabled first (no new addresses), and deleted, with its empty
// blocks, only once no address in it is allocated (as netplugctl pool delete refuses). Pools have
// no owner: deleting the Installation keeps them, and the addresses pods hold. The pools are
// read from the cache; one it lacks is read afresh before it is created (a pool made a moment ago
// by someone else is adopted or refused, never overwritten).
import { allocatedCount } from '../ipam/block.ts';
import { familyOf, keys } from '../model/keys.ts';
import type { PoolResource } from '../model/ip-pool.ts';
import { checkedBlock } from '../model/checked-documents.ts';
import { blockInPool, poolOf } from '../ipam/pools.ts';
import { parsePrefix, within } from '../net/cidr.ts';
import { GROUP, VERSION } from '../store/kubernetes/resources.ts';
import type { Write } from '../store/store.ts';
import { canonicalCidr } from './canonical-cidr.ts';
import type { Problem } from './compute-conditions.ts';
import { MANAGED_BY } from './installation.ts';
import { apply, type OperatorKube, readOrNothing } from './open-kube.ts';
import { type PoolObject, poolObject, samePool } from './desired-pools.ts';

export interface PoolsOutcome {
  problem: Problem | undefined;
  /** Pools still draining, for Progressing. */
  draining: string[];
  /** What changed, for the log. */
  done: string[];
}

const [LABEL, OWNER] = Object.entries(MANAGED_BY)[0] as [string, string];
const isOwned = (pool: PoolObject) => pool.metadata.labels?.[LABEL] === OWNER;

/** The pools of a list that hold a pool document (others are not netplug's to judge). */
export const poolObjects = (items: readonly PoolObject[]): PoolObject[] =>
  items.filter((item) => typeof item.spec?.spec?.cidr === 'string');

/** The pool as the API holds it now, if it holds one. */
async function readPool(kube: OperatorKube, name: string): Promise<PoolObject | undefined> {
  const found = (await readOrNothing(() =>
    kube.custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: 'ippools', name }),
  )) as PoolObject | undefined;
  return found && poolObjects([found]).length > 0 ? found : undefined;
}

const sameCidr = (a: string, b: string) => canonicalCidr(a) === canonicalCidr(b);

/** Whether two different CIDRs share addresses (one lies within the other). */
function overlaps(a: string, b: string): boolean {
  const [x, y] = [parsePrefix(a), parsePrefix(b)];
  return x !== undefined && y !== undefined && x.family === y.family && !sameCidr(a, b) && (within(x, y) || within(y, x));
}

/** Makes the pools match `desired`; `cached` is what the cache holds. */
export async function reconcilePools(kube: OperatorKube, cached: readonly PoolObject[], desired: PoolResource[]): Promise<PoolsOutcome> {
  const existing = poolObjects(cached);
  const outcome: PoolsOutcome = { problem: undefined, draining: [], done: [] };
  const refusals: string[] = [];
  for (const want of desired) {
    const name = want.metadata.name;
    const byName = existing.find((pool) => pool.metadata.name === name) ?? (await readPool(kube, name));
    const byCidr = existing.find((pool) => sameCidr(pool.spec.spec.cidr, want.spec.cidr));
    if (byCidr && byCidr.metadata.name !== name) {
      refusals.push(
        `IPPool "${byCidr.metadata.name}" already has the CIDR ${want.spec.cidr} of pool "${name}": name the pool "${byCidr.metadata.name}" in the Installation, or remove that pool`,
      );
      continue;
    }
    const overlapping = existing.find((pool) => pool.metadata.name !== name && overlaps(pool.spec.spec.cidr, want.spec.cidr));
    if (overlapping) {
      refusals.push(
        `IP pool "${name}" (${want.spec.cidr}) overlaps IP pool "${overlapping.metadata.name}" (${overlapping.spec.spec.cidr}): an address must belong to one pool; remove one of them`,
      );
      continue;
    }
    if (byName && !sameCidr(byName.spec.spec.cidr, want.spec.cidr)) {
      refusals.push(
        isOwned(byName)
          ? `cannot change the CIDR of IP pool "${name}" from ${byName.spec.spec.cidr} to ${want.spec.cidr} (addresses may be in use): list the new CIDR as a new pool, and remove the old one once empty`
          : `an IP pool named "${name}" (${byName.spec.spec.cidr}) exists and is not the operator's: cannot use the name for ${want.spec.cidr}`,
      );
      continue;
    }
    if (byName && !isOwned(byName) && !samePool(byName.spec.spec, want.spec)) {
      refusals.push(
        `cannot update IP pool "${name}" (${want.spec.cidr}): it is not owned by the operator (no label ${LABEL}=${OWNER}) and differs from the Installation's; make them agree, or delete the pool`,
      );
      continue;
    }
    if (byName && isOwned(byName) && samePool(byName.spec.spec, want.spec)) continue;
    // Created, adopted (labelled) or updated; the document keeps its creation time.
    const document = byName ? { ...want, metadata: { ...want.metadata, creationTimestamp: byName.spec.metadata.creationTimestamp } } : want;
    await apply(kube, poolObject(document));
    outcome.done.push(`${byName ? (isOwned(byName) ? 'updated' : 'adopted') : 'created'} IP pool "${name}" (${want.spec.cidr})`);
  }
  const wanted = new Set(desired.map((pool) => pool.metadata.name));
  for (const pool of existing.filter((p) => isOwned(p) && !wanted.has(p.metadata.name))) {
    const name = pool.metadata.name;
    if (!pool.spec.spec.disabled) {
      await apply(kube, poolObject({ ...pool.spec, spec: { ...pool.spec.spec, disabled: true } }));
      outcome.done.push(`disabled IP pool "${name}", no longer in the Installation: deleted once no address in it is allocated`);
    }
    const held = await deleteIfEmpty(kube, name);
    if (held === undefined) outcome.done.push(`deleted IP pool "${name}", no longer in the Installation`);
    else if (held > 0)
      outcome.draining.push(`IP pool "${name}" is disabled and drains: ${held} address${held === 1 ? '' : 'es'} still allocated`);
  }
  if (refusals.length > 0) outcome.problem = { reason: 'IPPoolConflict', message: refusals.join('; ') };
  return outcome;
}

/**
 * Deletes the pool with its empty blocks and their affinities if no address in it is allocated:
 * undefined when deleted, else the allocated count (0 if it changed meanwhile: tried again next pass).
 */
async function deleteIfEmpty(kube: OperatorKube, name: string): Promise<number | undefined> {
  const { store } = kube;
  const stored = await store.get<PoolResource>(keys.pool(name));
  if (!stored) return undefined;
  const pool = poolOf(stored.value);
  const blocks = (await store.list(keys.blocks(familyOf(pool.spec.cidr)))).map(checkedBlock).filter((b) => blockInPool(b.value.cidr, pool));
  const allocated = blocks.reduce((sum, block) => sum + allocatedCount(block.value), 0);
  if (allocated > 0) return allocated;
  const writes: Write[] = [{ key: stored.key, remove: true, revision: stored.revision }];
  for (const block of blocks) {
    writes.push({ key: block.key, remove: true, revision: block.revision });
    const node = block.value.affinity?.startsWith('host:') ? block.value.affinity.slice(5) : undefined;
    const affinity = node ? await store.get(keys.affinity(node, block.value.cidr)) : undefined;
    if (affinity) writes.push({ key: affinity.key, remove: true, revision: affinity.revision });
  }
  return (await store.commit(writes)) ? undefined : 0;
}
