// What this node's kernel should hold for its pods to reach every other node's pods, from the
// cluster alone: the routes, neighbours and FDB entries (desired-routes.ts; on host-local installs
// also to each node's pod CIDRs; host routes to workload addresses outside the blocks and to
// floating IPs), and the tunnel
// devices they need, each with the address the node holds for it (allocated by the addresses
// subsystem; read here from the blocks) and the VXLAN device with the node's MAC. A pure function:
// the routes subsystem programs the kernel when it changes (its text is what feed-trigger.ts
// compares), and every refresh interval.
import type { NodeAddress } from '../shared/node-address.ts';
import type { ClusterState } from '../shared/read-cluster.ts';
import { type Tunnel, tunnelHandle, vxlanMacFor } from '../shared/tunnels.ts';
import { desiredState, type DesiredState, type LocalNode, podCidrBlocks, uses } from './desired-routes.ts';

export const IPIP_DEVICE = 'tunl0';
export const VXLAN_DEVICE = 'vxlan.netplug';
/** VXLAN over IPv6 (the reference's vxlan-v6.calico; `vxlan-v6.netplug` would pass the kernel's 15 bytes). */
export const VXLAN_DEVICE6 = 'vxlan6.netplug';

export interface KernelState {
  local: LocalNode;
  routes: DesiredState;
  /** The IP-in-IP device, when wanted (the node holds a tunnel address, or a route goes through it). */
  ipip: { address: string | undefined } | undefined;
  /** The VXLAN device, likewise, with the node's MAC. */
  vxlan: { address: string | undefined; mac: string } | undefined;
  /** The IPv6 VXLAN device, likewise (only with the node's IPv6 address, its local end). */
  vxlan6: { address: string | undefined; mac: string; local: string } | undefined;
  /** Why some block is not routed, and documents that could not be read. */
  notes: string[];
}

/**
 * `podCidrs`: a host-local install, routing each node's pod CIDRs besides the blocks. `address6`:
 * the node's IPv6 address (IP6), without which no IPv6 block is routed.
 */
export function kernelState(
  cluster: ClusterState,
  name: string,
  address: NodeAddress,
  podCidrs = false,
  address6?: NodeAddress,
): KernelState {
  const local: LocalNode = {
    name,
    address,
    interface: address.interface,
    ipipDevice: IPIP_DEVICE,
    vxlanDevice: VXLAN_DEVICE,
    vxlanDevice6: VXLAN_DEVICE6,
    ...(address6 ? { address6: { address: address6.address, prefixLength: address6.prefixLength, interface: address6.interface } } : {}),
  };
  const blocks = podCidrs ? [...cluster.blocks, ...podCidrBlocks(cluster.nodes)] : cluster.blocks;
  const routes = desiredState(local, cluster.nodes, blocks, cluster.pools, cluster.workloads);
  // While the allocator moves the node to another address (one given back, one taken), the first.
  const held = (tunnel: Tunnel) => [...(cluster.tunnelAddresses.get(tunnelHandle(tunnel, name)) ?? [])].sort()[0];
  const [ipip, vxlan, vxlan6] = [held('ipip'), held('vxlan'), held('vxlan-v6')];
  const own = cluster.nodes.find((node) => node.name === name);
  return {
    local,
    routes,
    ipip: ipip !== undefined || uses(routes, IPIP_DEVICE) ? { address: ipip } : undefined,
    vxlan: vxlan !== undefined || uses(routes, VXLAN_DEVICE) ? { address: vxlan, mac: vxlanMacFor(name, own?.vxlanMac) } : undefined,
    vxlan6:
      address6 && (vxlan6 !== undefined || uses(routes, VXLAN_DEVICE6))
        ? { address: vxlan6, mac: vxlanMacFor(name, own?.vxlanMac6, 6), local: address6.address }
        : undefined,
    notes: [...cluster.broken, ...routes.notes],
  };
}
