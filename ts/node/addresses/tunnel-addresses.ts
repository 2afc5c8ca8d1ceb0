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
import { type Tunnel, tunnelHandle } from '../shared/tunnels.ts';

/** The enabled IPv4 pools selecting the node whose `tunnel` mode is not Never. */
export function tunnelPools(tunnel: Tunnel, pools: readonly Pool[], labels: Labels): Pool[] {
  return pools.filter(
    (pool) =>
      pool.prefix.family === 4 &&
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
  const inPools = (address: string) => pools.some((pool) => blockInPool(`${address}/32`, pool));
  if (held.length === 1 && held[0] !== undefined && inPools(held[0])) return { address: held[0] };
  if (held.length === 0 && pools.length === 0) return { address: undefined };
  return undefined;
}

async function reconcileTunnelAddress(store: Store, node: string, tunnel: Tunnel, pools: readonly Pool[]): Promise<string | undefined> {
  const handle = tunnelHandle(tunnel, node);
  const held = await addressesOf(store, handle);
  const kept = held.find((a) => a.family === 4 && pools.some((pool) => blockInPool(a.block, pool)));
  if (kept && held.length === 1) return kept.address;
  if (held.length > 0) await releaseHandle(store, handle);
  if (pools.length === 0) return undefined;
  const attributes = { node, type: tunnel === 'ipip' ? 'ipipTunnelAddress' : 'vxlanTunnelAddress', timestamp: new Date().toISOString() };
  const [allocation] = await allocate({ store, handle, node, attributes }, [{ family: 4, pools }]);
  if (!allocation) throw new Error(`no ${tunnel === 'ipip' ? 'IP-in-IP' : 'VXLAN'} tunnel address was allocated for node "${node}"`);
  return allocation.address;
}
