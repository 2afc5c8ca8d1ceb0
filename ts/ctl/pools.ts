// netplugctl pool create|list|get|delete (update: pool-update.ts).
import { allocatedCount } from '../ipam/block.ts';
import { parsePrefix } from '../net/cidr.ts';
import { keys } from '../model/keys.ts';
import type { PoolResource } from '../model/ip-pool.ts';
import { checkedBlock, checkedPool } from '../model/checked-documents.ts';
import { IpamError } from '../ipam/errors.ts';
import { PoolOptionError, poolResource as validPoolResource, type PoolOptions } from '../model/pool-resource.ts';
import { blockInPool, listPools, poolOf, type Pool } from '../ipam/pools.ts';
import { retryOnConflict, type Entry, type Store, type Write } from '../store/store.ts';
import { details, table } from './table.ts';
import { refused, UsageError } from './usage.ts';

export type { PoolOptions };

/** Validates everything before writing anything. */
export function poolResource(name: string, options: PoolOptions, now: Date): PoolResource {
  try {
    return validPoolResource(name, options, now);
  } catch (err) {
    throw err instanceof PoolOptionError ? new UsageError(err.message) : err;
  }
}

export async function createPool(store: Store, name: string, options: PoolOptions): Promise<string> {
  const resource = poolResource(name, options, new Date());
  const created = parsePrefix(resource.spec.cidr);
  const overlapping = (await listPools(store)).find(
    (pool) =>
      created &&
      pool.prefix.family === created.family &&
      (blockInPool(resource.spec.cidr, pool) || blockInPool(pool.spec.cidr, { ...pool, prefix: created })),
  );
  if (overlapping) throw refused(`pool ${resource.spec.cidr} overlaps pool "${overlapping.name}" (${overlapping.spec.cidr})`);
  if (!(await store.commit([{ key: keys.pool(name), create: resource }]))) throw refused(`pool "${name}" already exists`);
  return `pool "${name}" created: ${resource.spec.cidr}, blocks of /${resource.spec.blockSize}, nodes ${resource.spec.nodeSelector}\n`;
}

export async function listPoolsCommand(store: Store, json: boolean): Promise<string> {
  const pools = await listPools(store);
  if (json) return `${JSON.stringify({ pools: pools.map(poolJson) }, null, 2)}\n`;
  return table(
    ['NAME', 'CIDR', 'BLOCK', 'NODE SELECTOR', 'IPIP', 'VXLAN', 'NAT', 'DISABLED'],
    pools.map((p) => [
      p.name,
      p.spec.cidr,
      `/${p.spec.blockSize}`,
      p.spec.nodeSelector,
      p.spec.ipipMode,
      p.spec.vxlanMode,
      String(p.spec.natOutgoing),
      String(p.spec.disabled),
    ]),
  );
}

export async function getPool(store: Store, name: string, json: boolean): Promise<string> {
  const pool = (await listPools(store)).find((p) => p.name === name);
  if (!pool) throw refused(`pool "${name}" does not exist`);
  if (json) return `${JSON.stringify(poolJson(pool), null, 2)}\n`;
  return details([
    ['name', pool.name],
    ['cidr', pool.spec.cidr],
    ['block size', pool.spec.blockSize],
    ['node selector', pool.spec.nodeSelector],
    ['ipip mode', pool.spec.ipipMode],
    ['vxlan mode', pool.spec.vxlanMode],
    ['nat outgoing', String(pool.spec.natOutgoing)],
    ['disabled', String(pool.spec.disabled)],
  ]);
}

/**
 * Refused while the pool holds addresses, unless `force`. Its empty blocks and their affinities go
 * with it. Forced, the blocks that still hold addresses stay (so that no address is handed out
 * twice) but lose their node: each goes when its pods' DEL releases its last address. One
 * compare-and-swap commit, read again and retried if anything changed meanwhile.
 */
export async function deletePool(store: Store, name: string, force = false): Promise<string> {
  let kept = { blocks: 0, addresses: 0 };
  const emptied = await retryOnConflict(`deleting pool "${name}"`, async () => {
    const stored = await store.get(keys.pool(name));
    if (!stored) throw refused(`pool "${name}" does not exist`);
    let entry: Entry<PoolResource>;
    try {
      entry = checkedPool(stored);
    } catch (err) {
      // A pool nobody can read can still be removed: its document alone, its blocks unknown.
      if (!(err instanceof IpamError) || !force)
        throw err instanceof IpamError ? refused(`${err.message} (pool delete --force removes it)`) : err;
      return (await store.commit([{ key: stored.key, remove: true, revision: stored.revision }])) ? 0 : undefined;
    }
    const pool = poolOf(entry.value);
    const blocks = (await store.list(keys.blocks(pool.prefix.family))).map(checkedBlock).filter((b) => blockInPool(b.value.cidr, pool));
    const allocated = blocks.reduce((sum, b) => sum + allocatedCount(b.value), 0);
    if (allocated > 0 && !force) {
      throw refused(
        `pool "${name}" still has ${allocated} allocated address${allocated === 1 ? '' : 'es'}; release them first, or add --force to delete it anyway (they stay allocated until their pods are deleted)`,
      );
    }
    // The pool first: a datastore without transactions that stops part-way has at worst blocks left, which nothing allocates from.
    const writes: Write[] = [{ key: entry.key, remove: true, revision: entry.revision }];
    for (const block of blocks) {
      const holding = allocatedCount(block.value) > 0;
      writes.push(
        holding
          ? { key: block.key, update: { ...block.value, affinity: null }, revision: block.revision }
          : { key: block.key, remove: true, revision: block.revision },
      );
      const node = block.value.affinity?.startsWith('host:') ? block.value.affinity.slice(5) : undefined;
      const affinity = node ? await store.get(keys.affinity(node, block.value.cidr)) : undefined;
      if (affinity) writes.push({ key: affinity.key, remove: true, revision: affinity.revision });
    }
    kept = { blocks: blocks.filter((b) => allocatedCount(b.value) > 0).length, addresses: allocated };
    return (await store.commit(writes)) ? blocks.length - kept.blocks : undefined;
  });
  const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : what.endsWith('s') ? 'es' : 's'}`;
  return `pool "${name}" deleted${emptied ? ` with ${plural(emptied, 'empty block')}` : ''}${
    kept.blocks
      ? `; ${plural(kept.blocks, 'block')} still ${kept.blocks === 1 ? 'holds' : 'hold'} ${plural(kept.addresses, 'address')}, released as their pods are deleted`
      : ''
  }\n`;
}

function poolJson(pool: Pool) {
  return { name: pool.name, ...pool.spec };
}
