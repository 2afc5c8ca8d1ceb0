// IPAM usage per pool for netplug_ipam_allocations and netplug_ipam_free_addresses: the figures
// `netplugctl ipam show` gives (allocated = addresses held in the pool's blocks, free = the pool's
// size less those), from the pools and the blocks, never the handles or endpoints, every
// OBSERVE_POOLS_INTERVAL_MS. Counted from the agent's watch of blocks and pools (cluster-feed.ts)
// when it is in step, so that no agent reads every block of the cluster on a timer (on N nodes, N
// full reads each interval); read from the datastore only while the watch is not in step, or where
// the datastore has none.
import { allocatedCount } from '../../ipam/block.ts';
import { keys } from '../../model/keys.ts';
import { checkedBlock } from '../../model/checked-documents.ts';
import { blockInPool, poolsOf } from '../../ipam/pools.ts';
import { size } from '../../net/cidr.ts';
import type { Entry, Store } from '../../store/store.ts';
import type { PoolUsageMetrics } from './pool-usage-metrics.ts';
import type { ClusterFeed } from '../shared/cluster-feed.ts';

export const OBSERVE_POOLS_INTERVAL_MS = 30_000;

interface PoolUsage {
  pool: string;
  allocated: number;
  free: number;
}

/** Each pool's usage, by pool name, from the followed blocks and pools if in step, else read from the store. */
async function poolUsage(store: Store, feed?: Pick<ClusterFeed, 'entries'>): Promise<PoolUsage[]> {
  const [pools, blocks] = [feed?.entries(keys.pools), feed?.entries(keys.allBlocks)];
  if (pools && blocks) return poolUsageOf(pools, blocks);
  const [read, readBlocks] = await Promise.all([store.list(keys.pools), store.list(keys.allBlocks)]);
  return poolUsageOf(read, readBlocks);
}

/** Each pool's usage, by pool name, from the entries under keys.pools and keys.allBlocks. */
function poolUsageOf(poolEntries: readonly Entry<unknown>[], blockEntries: readonly Entry<unknown>[]): PoolUsage[] {
  const pools = poolsOf(poolEntries);
  const blocks = blockEntries.map((entry) => checkedBlock(entry).value);
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
export async function observePools(
  store: Store,
  metrics: Pick<PoolUsageMetrics, 'setPoolUsage' | 'keepOnlyPools'>,
  feed?: Pick<ClusterFeed, 'entries'>,
): Promise<void> {
  const usage = await poolUsage(store, feed);
  for (const { pool, allocated, free } of usage) metrics.setPoolUsage(pool, allocated, free);
  metrics.keepOnlyPools(usage.map((u) => u.pool));
}
