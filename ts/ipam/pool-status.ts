// STATUS of netplug-ipam: whether an ADD on this node could get an address of each requested
// family, that is an enabled pool selects the node and one of them has room.
import { CniError, ErrorCode } from '../cni/errors.ts';
import type { NetplugIpamConfig } from '../config/ipam.ts';
import type { Family } from '../net/cidr.ts';
import type { Store } from '../store/store.ts';
import { choosePools, familyName, listPools, nodeLabels } from './pools.ts';
import { poolsWithRoom } from './room.ts';

export async function requireUsablePools(
  store: Store,
  node: string,
  families: readonly Family[],
  config: NetplugIpamConfig,
): Promise<void> {
  const pools = await listPools(store);
  const labels = await nodeLabels(store, node);
  for (const family of families) {
    const requested = family === 4 ? config.ipv4_pools : config.ipv6_pools;
    const usable = choosePools(pools, family, requested, labels, `netconf field "ipam.ipv${family}_pools"`);
    if (usable.length === 0)
      throw new CniError(ErrorCode.PluginNotAvailable, `no enabled ${familyName(family)} pool selects node "${node}"`);
    if ((await poolsWithRoom(store, usable)).length === 0) {
      throw new CniError(
        ErrorCode.PluginNotAvailable,
        `every usable ${familyName(family)} pool is exhausted: ${usable.map((p) => `${p.name} (${p.spec.cidr})`).join(', ')}`,
      );
    }
  }
}
