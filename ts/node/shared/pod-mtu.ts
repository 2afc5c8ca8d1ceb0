// The MTU pods get with `"mtu": 0` (the MTU file netplug-node writes): the underlay's, less what
// the encapsulation the pools use adds to each packet, so that a pod's full-size packet still fits
// the underlay once wrapped (no path-MTU black hole between nodes). As the reference, the largest
// overhead of any pool counts, for every pod: a pod on a direct route to one node may talk to
// another over VXLAN.
import { poolsOf, type Pool } from '../../ipam/pools.ts';
import type { Entry } from '../../store/store.ts';

/** Bytes an IP-in-IP header adds (an outer IPv4 header). */
export const IPIP_OVERHEAD = 20;
/** Bytes VXLAN adds over an IPv4 underlay: outer IPv4 (20), UDP (8), VXLAN (8) and inner Ethernet (14) headers. */
export const VXLAN_OVERHEAD = 50;
/** Bytes VXLAN adds over an IPv6 underlay: its outer header is 40 bytes, not 20. */
export const VXLAN6_OVERHEAD = 70;

/** The overhead of the encapsulation `pools` ask for; 0 when netplug-node programs no routes (the cluster's network carries pods). */
function encapsulationOverhead(pools: readonly Pick<Pool, 'spec'>[], routes: boolean): number {
  if (!routes) return 0;
  let overhead = 0;
  for (const { spec } of pools) {
    if (spec.vxlanMode !== 'Never') overhead = Math.max(overhead, spec.cidr.includes(':') ? VXLAN6_OVERHEAD : VXLAN_OVERHEAD);
    if (spec.ipipMode !== 'Never') overhead = Math.max(overhead, IPIP_OVERHEAD);
  }
  return overhead;
}

/** The overhead of the pools among `entries` (a document that is not a pool is skipped: the pools subsystem reports it). */
export function overheadOfPoolEntries(entries: readonly Entry<unknown>[], routes: boolean): number {
  const pools = entries.flatMap((entry) => {
    try {
      return poolsOf([entry]);
    } catch {
      return [];
    }
  });
  return encapsulationOverhead(pools, routes);
}
