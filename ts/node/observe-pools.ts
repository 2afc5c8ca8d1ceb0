// IPAM usage per pool for netplug_ipam_allocations and netplug_ipam_free_addresses: the figures
// `netplugctl ipam show` gives (allocated = addresses held in the pool's blocks, free = the pool's
// size less those), from one read of the pools and the blocks, never the handles or endpoints,
// and only every OBSERVE_POOLS_INTERVAL_MS: cheap enough for every node to report.
import { allocatedCount } from '../ipam/block.ts';
import { keys } from '../ipam/model.ts';
import { checkedBlock } from '../ipam/checked-documents.ts';
import { blockInPool, listPools } from '../ipam/pools.ts';
import { size } from '../net/cidr.ts';
import type { Store } from '../store/store.ts';
import type { AgentMetrics } from './metrics.ts';

export const OBSERVE_POOLS_INTERVAL_MS = 30_000;

export interface PoolUsage {
  pool: string;
  allocated: number;
  free: number;
}

/** Each pool's usage, by pool name. */
export async function readPoolUsage(store: Store): Promise<PoolUsage[]> {
  const [pools, v4, v6] = await Promise.all([listPools(store), store.list(keys.blocks(4)), store.list(keys.blocks(6))]);
  const blocks = [...v4, ...v6].map((entry) => checkedBlock(entry).value);
  const allocatedIn = new Map<string, number>();
  for (const block of blocks) {
    // A block counts for the first pool (by name) it lies in, as in `netplugctl ipam show`.
    const pool = pools.find((p) => blockInPool(block.cidr, p));
    if (pool) allocatedIn.set(pool.name, (allocatedIn.get(pool.name) ?? 0) + allocatedCount(block));
  }
  return pools.map((pool) => {
    const allocated = allocatedIn.get(pool.name) ?? 0;
    // A number, exact for every IPv4 pool; an IPv6 pool's free count is approximate past 2^53.
    return { pool: pool.name, allocated, free: Number(size(pool.prefix) - BigInt(allocated)) };
  });
}

/** Sets the pools' usage in `metrics` now; drops pools that are gone. */
export async function observePools(store: Store, metrics: Pick<AgentMetrics, 'setPoolUsage' | 'keepOnlyPools'>): Promise<void> {
  const usage = await readPoolUsage(store);
  for (const { pool, allocated, free } of usage) metrics.setPoolUsage(pool, allocated, free);
  metrics.keepOnlyPools(usage.map((u) => u.pool));
}
