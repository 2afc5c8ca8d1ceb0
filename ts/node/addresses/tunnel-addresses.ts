// The node's tunnel addresses, taken from the pools through netplug-ipam's allocator as the
// reference's node agent takes them: handle `ipip-tunnel-addr-<node>` or
// `vxlan-tunnel-addr-<node>`, attribute `type` ipipTunnelAddress / vxlanTunnelAddress. A node has
// one only while an enabled pool that selects it uses that encapsulation; it keeps the address it
// holds while that address's pool still qualifies, and gives it back when none does.
import { allocate } from '../../ipam/allocator.ts';
import { addressesOf } from '../../ipam/known-state.ts';
import { releaseHandle } from '../../ipam/release.ts';
import { blockInPool, type Pool } from '../../ipam/pools.ts';
import { matches } from '../../selectors/evaluate.ts';
import { parseSelector } from '../../selectors/parse.ts';
import type { Labels } from '../../selectors/syntax.ts';
import type { Store } from '../../store/store.ts';
import { parseIp } from '../../net/cidr.ts';
import { type Tunnel, tunnelFamily, tunnelHandle } from '../shared/tunnels.ts';

/** The allocation attribute `type` of each tunnel's address, as the reference's. */
const ATTRIBUTE_TYPES: Record<Tunnel, string> = {
  ipip: 'ipipTunnelAddress',
  vxlan: 'vxlanTunnelAddress',
  'vxlan-v6': 'vxlanV6TunnelAddress',
};

/** Each tunnel as the log names it. */
export const TUNNEL_NAMES: Record<Tunnel, string> = { ipip: 'IP-in-IP', vxlan: 'VXLAN', 'vxlan-v6': 'IPv6 VXLAN' };

/** The enabled pools of the tunnel's family (IPv6 for vxlan-v6) selecting the node whose `tunnel` mode is not Never. */
export function tunnelPools(tunnel: Tunnel, pools: readonly Pool[], labels: Labels): Pool[] {
  return pools.filter(
    (pool) =>
      pool.prefix.family === tunnelFamily(tunnel) &&
      !pool.spec.disabled &&
      (tunnel === 'ipip' ? pool.spec.ipipMode : pool.spec.vxlanMode) !== 'Never' &&
      matches(parseSelector(pool.spec.nodeSelector), labels),
  );
}

/**
 * The node's tunnel address for `tunnel` (allocated if needed), or undefined (released if held)
 * when no pool asks. `held` is what the blocks say the handle holds: when that is already right,
 * nothing is read or written.
 */
export async function ensureTunnelAddress(
  store: Store,
  node: string,
  tunnel: Tunnel,
  pools: readonly Pool[],
  held: readonly string[] = [],
): Promise<string | undefined> {
  const settled = settledTunnelAddress(pools, held);
  return settled ? settled.address : reconcileTunnelAddress(store, node, tunnel, pools);
}

/**
 * What `held` settles with no read or write: the address the node keeps, or none (no pool asks
 * and none is held); undefined when the allocator must act (allocate, release, or keep one of
 * several).
 */
export function settledTunnelAddress(pools: readonly Pool[], held: readonly string[] = []): { address: string | undefined } | undefined {
  const inPools = (address: string) => pools.some((pool) => blockInPool(`${address}/${parseIp(address)?.family === 6 ? 128 : 32}`, pool));
  if (held.length === 1 && held[0] !== undefined && inPools(held[0])) return { address: held[0] };
  if (held.length === 0 && pools.length === 0) return { address: undefined };
  return undefined;
}

async function reconcileTunnelAddress(store: Store, node: string, tunnel: Tunnel, pools: readonly Pool[]): Promise<string | undefined> {
  const handle = tunnelHandle(tunnel, node);
  const held = await addressesOf(store, handle);
  const family = tunnelFamily(tunnel);
  const kept = held.find((a) => a.family === family && pools.some((pool) => blockInPool(a.block, pool)));
  if (kept && held.length === 1) return kept.address;
  if (held.length > 0) await releaseHandle(store, handle);
  if (pools.length === 0) return undefined;
  const attributes = { node, type: ATTRIBUTE_TYPES[tunnel], timestamp: new Date().toISOString() };
  const [allocation] = await allocate({ store, handle, node, attributes }, [{ family, pools }]);
  if (!allocation) throw new Error(`no ${TUNNEL_NAMES[tunnel]} tunnel address was allocated for node "${node}"`);
  return allocation.address;
}
