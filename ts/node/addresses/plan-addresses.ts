// What the node's addresses should be where other nodes read them, from the cluster alone (no
// read, no write): its underlay addresses (IPv6 with IP6), and a tunnel address per encapsulation a pool selecting
// it uses (with the VXLAN MAC beside the VXLAN one). What is still to be written follows: a tunnel
// address the allocator must take or give back, or a published spec that differs. The addresses
// subsystem's controller is woken only when something is left to write (feed-trigger.ts), so its
// own writes, which leave nothing, do not wake it again.
import type { NodeSpec } from '../../model/node.ts';
import type { Pool } from '../../ipam/pools.ts';
import { formatNodeAddress, type NodeAddress } from '../shared/node-address.ts';
import type { ClusterState } from '../shared/read-cluster.ts';
import { type Tunnel, tunnelHandle, vxlanMacFor } from '../shared/tunnels.ts';
import { sameSpec } from './publish-addresses.ts';
import { settledTunnelAddress, tunnelPools } from './tunnel-addresses.ts';

export const TUNNELS: readonly Tunnel[] = ['ipip', 'vxlan', 'vxlan-v6'];

interface TunnelPlan {
  /** The pools the node's address for this tunnel may come from. */
  pools: Pool[];
  /** What the blocks say the node holds. */
  held: string[];
  /** The address kept (or none) when `held` settles it; undefined when the allocator must act. */
  settled: { address: string | undefined } | undefined;
}

export interface AddressesPlan {
  tunnels: Record<Tunnel, TunnelPlan>;
  /** The addresses to publish; undefined while a tunnel address is not settled. */
  spec: NodeSpec | undefined;
  /** What the node's document holds now. */
  published: NodeSpec | undefined;
  /** Whether the node's document exists: on the Kubernetes datastore, publishing needs it. */
  registered: boolean;
}

export function planAddresses(cluster: ClusterState, name: string, address: NodeAddress, address6?: NodeAddress): AddressesPlan {
  const own = cluster.nodes.find((node) => node.name === name);
  const labels = own?.labels ?? {};
  const tunnel = (kind: Tunnel): TunnelPlan => {
    // VXLAN over IPv6 needs the node's IPv6 address (IP6) for its device: none, no address for it.
    const pools = kind === 'vxlan-v6' && !address6 ? [] : tunnelPools(kind, cluster.pools, labels);
    const held = cluster.tunnelAddresses.get(tunnelHandle(kind, name)) ?? [];
    return { pools, held, settled: settledTunnelAddress(pools, held) };
  };
  const tunnels = { ipip: tunnel('ipip'), vxlan: tunnel('vxlan'), 'vxlan-v6': tunnel('vxlan-v6') };
  const [ipip, vxlan, vxlan6] = [tunnels.ipip.settled, tunnels.vxlan.settled, tunnels['vxlan-v6'].settled];
  const spec: NodeSpec | undefined =
    ipip && vxlan && vxlan6
      ? {
          bgp: {
            ipv4Address: formatNodeAddress(address),
            ...(address6 ? { ipv6Address: formatNodeAddress(address6) } : {}),
            ...(ipip.address ? { ipv4IPIPTunnelAddr: ipip.address } : {}),
          },
          ...(vxlan.address ? { ipv4VXLANTunnelAddr: vxlan.address, vxlanTunnelMACAddr: vxlanMacFor(name, own?.vxlanMac) } : {}),
          ...(vxlan6.address ? { ipv6VXLANTunnelAddr: vxlan6.address, vxlanTunnelMACAddrV6: vxlanMacFor(name, own?.vxlanMac6, 6) } : {}),
        }
      : undefined;
  return { tunnels, spec, published: own?.spec, registered: own !== undefined };
}

/** What is left to do for `tunnel`, as text; undefined when nothing is. */
export function tunnelWork(plan: AddressesPlan, tunnel: Tunnel): string | undefined {
  const { pools, held, settled } = plan.tunnels[tunnel];
  return settled ? undefined : JSON.stringify({ pools: pools.map((pool) => pool.name), held });
}

/**
 * The spec still to publish, as text; undefined when it is published (or a tunnel address must be
 * settled first). The text says whether the node's document exists: a publish that failed while
 * the Kubernetes Node was gone is tried again as soon as the Node is back, not after its backoff.
 */
export function publishWork(plan: AddressesPlan): string | undefined {
  const { spec, published, registered } = plan;
  if (!spec || sameSpec(published, spec)) return undefined;
  return registered ? JSON.stringify(spec) : JSON.stringify({ unregistered: spec });
}
