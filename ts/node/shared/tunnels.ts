// The node's tunnels as both the addresses subsystem (which allocates and publishes their
// addresses) and the routes subsystem (which makes their devices) name them: the handle a tunnel
// address is allocated under, as the reference's node agent names it, and the node's VXLAN MACs.
// `vxlan-v6` is VXLAN over IPv6: IPv6 pools' blocks between nodes' IPv6 addresses.
import { createHash } from 'node:crypto';

export type Tunnel = 'ipip' | 'vxlan' | 'vxlan-v6';

/** The family of a tunnel's addresses, inside and out. */
export const tunnelFamily = (tunnel: Tunnel): 4 | 6 => (tunnel === 'vxlan-v6' ? 6 : 4);

export const tunnelHandle = (tunnel: Tunnel, node: string): string => `${tunnel}-tunnel-addr-${node}`;

/** A locally administered unicast MAC derived from the node's name: the same after every restart. */
export function vxlanMacOf(node: string, family: 4 | 6 = 4): string {
  const bytes = createHash('sha256')
    .update(family === 4 ? `netplug vxlan ${node}` : `netplug vxlan-v6 ${node}`)
    .digest()
    .subarray(0, 5);
  return ['66', ...[...bytes].map((b) => b.toString(16).padStart(2, '0'))].join(':');
}

/** The node's VXLAN MAC: the one it published (kept across a change of the derivation), else derived from its name. */
export const vxlanMacFor = (node: string, published: string | undefined, family: 4 | 6 = 4): string =>
  published ?? vxlanMacOf(node, family);
