// Whether pools have a free address left, for STATUS: a block not claimed yet, or a free ordinal.
import type { Store } from '../store/store.ts';
import { cidrOfKey, keys } from '../model/keys.ts';
import { checkedBlocks } from '../model/checked-documents.ts';
import { blockInPool, type Pool } from './pools.ts';

export async function poolsWithRoom(store: Store, pools: readonly Pool[]): Promise<Pool[]> {
  const withRoom: Pool[] = [];
  for (const pool of pools) {
    const inPool = (cidr: string) => blockInPool(cidr, pool);
    const claimed = (await store.listKeys(keys.blocks(pool.prefix.family))).map(cidrOfKey).filter(inPool);
    if (BigInt(claimed.length) < 1n << BigInt(pool.spec.blockSize - pool.prefix.length)) {
      withRoom.push(pool);
      continue;
    }
    const blocks = checkedBlocks(await store.list<unknown>(keys.blocks(pool.prefix.family)));
    if (blocks.some(({ value }) => inPool(value.cidr) && value.unallocated.length > 0)) withRoom.push(pool);
  }
  return withRoom;
}
