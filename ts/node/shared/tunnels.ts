// The node's tunnels as both the addresses subsystem (which allocates and publishes their
// addresses) and the routes subsystem (which makes their devices) name them: the handle a tunnel
// address is allocated under, as the reference's node agent names it, and the node's VXLAN MAC.
import { createHash } from 'node:crypto';

export type Tunnel = 'ipip' | 'vxlan';

export const tunnelHandle = (tunnel: Tunnel, node: string): string => `${tunnel}-tunnel-addr-${node}`;

/** A locally administered unicast MAC derived from the node's name: the same after every restart. */
export function vxlanMacOf(node: string): string {
  const bytes = createHash('sha256').update(`netplug vxlan ${node}`).digest().subarray(0, 5);
  return ['66', ...[...bytes].map((b) => b.toString(16).padStart(2, '0'))].join(':');
}

/** The node's VXLAN MAC: the one it published (kept across a change of the derivation), else derived from its name. */
export const vxlanMacFor = (node: string, published: string | undefined): string => published ?? vxlanMacOf(node);
