// What the kernel of one node should hold so that its pods reach every other node's pods: a pure
// function of the datastore (nodes with their addresses, blocks with their affinities, pools),
// recomputed whole on every pass. Per block affine to another node, the block's pool decides:
//   - VXLAN (vxlanMode Always, or CrossSubnet and the node on another subnet): via the node's VXLAN
//     tunnel address on the VXLAN device, onlink, with a neighbour entry (tunnel address → the
//     node's VXLAN MAC) and an FDB entry (MAC → the node's underlay address);
//   - IP-in-IP (ipipMode likewise): via the node's underlay address on the IP-in-IP device, onlink:
//     a device without a fixed remote (tunl0) takes the outer destination from the route's gateway,
//     so the gateway is the node, not its tunnel address (which would send the packet back into
//     the tunnel);
//   - otherwise directly via the node's underlay address, which must then be on this node's subnet
//     (a node elsewhere is left to the underlay's own routing, and said so).
// IPv6 blocks go through the nodes' IPv6 addresses (IP6): over VXLAN as the pool says, on the IPv6
// VXLAN device (its own tunnel addresses, MACs, neighbour and FDB entries, the FDB pointing at the
// nodes' IPv6 addresses), otherwise directly. IP-in-IP has no IPv6 form (the reference refuses an
// IPv6 pool asking for it; one written anyway is routed as without it, and said so). A node
// without an IPv6 address, this one or the other, routes no IPv6 block.
// Addresses a node borrowed from a block affine to another node get a host route to the borrower
// (/32, or /128).
// On host-local installs each node's pod CIDRs count as blocks affine to it (podCidrBlocks), and so
// are routed as above: the pool holding them, if any, decides the encapsulation.
// A workload's address that no block routes to its node (one from ipAddrsNoIpam, chosen outside
// the address manager) and a floating IP get a host route to the workload's node, as the
// specification has it for ipAddrsNoIpam: only inside a pool without VXLAN (direct, or IP-in-IP
// as the pool says). In a VXLAN pool or outside every pool they are left to the operator's own
// routing, and noted (the floating IP's node forwards it to the pod: ts/node/nat/).
import { contains, parseIp, parsePrefix } from '../../net/cidr.ts';
import type { Pool } from '../../ipam/pools.ts';
import type { EncapsulationMode } from '../../model/ip-pool.ts';
import type { NodeAddresses, RoutedBlock, RoutedWorkload } from '../shared/read-cluster.ts';
import { unroutedNotes, workloadHostRoutes } from './workload-routes.ts';

export type { NodeAddresses, RoutedBlock, RoutedWorkload };

export type RouteKind = 'direct' | 'ipip' | 'vxlan';

export interface LocalNode {
  name: string;
  address: { address: string; prefixLength: number };
  /** The interface holding the address: direct routes leave through it. */
  interface: string;
  ipipDevice: string;
  vxlanDevice: string;
  /** The IPv6 address (IP6) and the interface holding it; IPv6 blocks are routed only with it. */
  address6?: { address: string; prefixLength: number; interface: string };
  /** The IPv6 VXLAN device (IPv6 pools with VXLAN). */
  vxlanDevice6?: string;
}

interface DesiredRoute {
  dst: string;
  via: string;
  dev: string;
  onlink?: true;
  kind: RouteKind;
}

export interface DesiredState {
  routes: DesiredRoute[];
  /** On the VXLAN device: each remote VXLAN tunnel address → that node's VXLAN MAC. */
  neighbors: { ip: string; mac: string }[];
  /** On the VXLAN device: each remote VXLAN MAC → that node's underlay address. */
  fdb: { mac: string; dst: string }[];
  /** The same on the IPv6 VXLAN device: IPv6 tunnel addresses, the nodes' IPv6 underlay addresses. */
  neighbors6: { ip: string; mac: string }[];
  fdb6: { mac: string; dst: string }[];
  /** Why some block is not routed (a node without published addresses, …), sorted; informational. */
  notes: string[];
}

/** The routes, neighbours and FDB entries `local` needs to reach every other node's blocks and workloads. */
export function desiredState(
  local: LocalNode,
  nodes: readonly NodeAddresses[],
  blocks: readonly RoutedBlock[],
  pools: readonly Pool[],
  workloads: readonly RoutedWorkload[] = [],
): DesiredState {
  const byName = new Map(nodes.map((node) => [node.name, node]));
  const routes = new Map<string, DesiredRoute>();
  const neighbors = new Map<string, { ip: string; mac: string }>();
  const fdb = new Map<string, { mac: string; dst: string }>();
  const neighbors6 = new Map<string, { ip: string; mac: string }>();
  const fdb6 = new Map<string, { mac: string; dst: string }>();
  const notes = new Set<string>();
  const localSubnet = parsePrefix(`${local.address.address}/${local.address.prefixLength}`);
  const local6 = local.address6;
  const localSubnet6 = local6 && parsePrefix(`${local6.address}/${local6.prefixLength}`);

  const routeTo = (dst: string, nodeName: string) => {
    if (nodeName === local.name) return;
    const node = byName.get(nodeName);
    // A node gone from the datastore loses its routes: nothing to route its blocks through.
    if (!node) return;
    if (parsePrefix(dst)?.family === 6) {
      routeTo6(dst, node);
      return;
    }
    if (!node.address) {
      notes.add(`node "${nodeName}" has not published its address: ${dst} is not routed`);
      return;
    }
    const remote = node.address.address;
    const ip = parseIp(remote);
    const sameSubnet = localSubnet !== undefined && ip !== undefined && ip.family === 4 && contains(localSubnet, ip.family, ip.value);
    const pool = poolOf(dst, pools);
    const wants = (mode: EncapsulationMode | undefined) => mode === 'Always' || (mode === 'CrossSubnet' && !sameSubnet);
    if (wants(pool?.spec.vxlanMode)) {
      if (!node.vxlanTunnelAddr || !node.vxlanMac) {
        notes.add(`node "${nodeName}" has no VXLAN tunnel address and MAC yet: ${dst} (pool "${pool?.name}") is not routed`);
        return;
      }
      routes.set(dst, { dst, via: node.vxlanTunnelAddr, dev: local.vxlanDevice, onlink: true, kind: 'vxlan' });
      neighbors.set(node.vxlanTunnelAddr, { ip: node.vxlanTunnelAddr, mac: node.vxlanMac });
      fdb.set(node.vxlanMac, { mac: node.vxlanMac, dst: remote });
    } else if (wants(pool?.spec.ipipMode)) {
      routes.set(dst, { dst, via: remote, dev: local.ipipDevice, onlink: true, kind: 'ipip' });
    } else if (sameSubnet) {
      routes.set(dst, { dst, via: remote, dev: local.interface, kind: 'direct' });
    } else {
      notes.add(
        `node "${nodeName}" (${remote}/${node.address.prefixLength}) is not on this node's subnet and ${pool ? `pool "${pool.name}" uses no encapsulation` : 'no pool holds it'}: ${dst} is left to the underlay's routing`,
      );
    }
  };

  /** An IPv6 destination: directly via the node's IPv6 address, on this node's IPv6 subnet. */
  const routeTo6 = (dst: string, node: NodeAddresses) => {
    if (!local6) {
      notes.add("this node has no IPv6 address (IP6 is none): other nodes' IPv6 blocks are not routed");
      return;
    }
    if (!node.address6) {
      notes.add(`node "${node.name}" has not published an IPv6 address (its IP6): ${dst} is not routed`);
      return;
    }
    const remote = node.address6.address;
    const ip = parseIp(remote);
    const sameSubnet = localSubnet6 !== undefined && ip?.family === 6 && contains(localSubnet6, 6, ip.value);
    const pool = poolOf(dst, pools);
    const wants = (mode: EncapsulationMode | undefined) => mode === 'Always' || (mode === 'CrossSubnet' && !sameSubnet);
    if (wants(pool?.spec.vxlanMode)) {
      if (!local.vxlanDevice6 || !node.vxlanTunnelAddr6 || !node.vxlanMac6) {
        notes.add(`node "${node.name}" has no IPv6 VXLAN tunnel address and MAC yet: ${dst} (pool "${pool?.name}") is not routed`);
        return;
      }
      routes.set(dst, { dst, via: node.vxlanTunnelAddr6, dev: local.vxlanDevice6, onlink: true, kind: 'vxlan' });
      neighbors6.set(node.vxlanTunnelAddr6, { ip: node.vxlanTunnelAddr6, mac: node.vxlanMac6 });
      fdb6.set(node.vxlanMac6, { mac: node.vxlanMac6, dst: remote });
      return;
    }
    if (pool && pool.spec.ipipMode !== 'Never')
      notes.add(`pool "${pool.name}" asks for IP-in-IP, which has no IPv6 form: its blocks are routed as without it`);
    if (sameSubnet) routes.set(dst, { dst, via: remote, dev: local6.interface, kind: 'direct' });
    else
      notes.add(
        `node "${node.name}" (${remote}/${node.address6.prefixLength}) is not on this node's IPv6 subnet: ${dst} is left to the underlay's routing`,
      );
  };

  for (const block of blocks) {
    const family = parsePrefix(block.cidr)?.family;
    if (family === undefined) continue;
    if (block.node !== undefined) routeTo(block.cidr, block.node);
    const host = family === 4 ? 32 : 128;
    for (const { address, node } of block.borrowed) if (node !== block.node) routeTo(`${address}/${host}`, node);
  }
  const hosted = workloadHostRoutes(local.name, workloads, blocks, (address) => poolOf(address, pools));
  for (const { dst, node } of hosted.routes) if (!routes.has(dst)) routeTo(dst, node);
  for (const note of unroutedNotes(hosted.unrouted)) notes.add(note);
  const sorted = <T>(map: Map<string, T>) => [...map.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
  return {
    routes: sorted(routes),
    neighbors: sorted(neighbors),
    fdb: sorted(fdb),
    neighbors6: sorted(neighbors6),
    fdb6: sorted(fdb6),
    notes: [...notes].sort(),
  };
}

/** Each node's pod CIDRs as blocks affine to it: what host-local installs route by. */
export function podCidrBlocks(nodes: readonly NodeAddresses[]): RoutedBlock[] {
  return nodes.flatMap((node) => (node.podCidrs ?? []).map((cidr) => ({ cidr, node: node.name, borrowed: [] })));
}

/** The pool holding `cidr` (the most specific, should pools nest). */
function poolOf(cidr: string, pools: readonly Pool[]): Pool | undefined {
  const prefix = parsePrefix(cidr);
  if (!prefix) return undefined;
  return pools
    .filter(
      (pool) =>
        pool.prefix.family === prefix.family && pool.prefix.length <= prefix.length && contains(pool.prefix, prefix.family, prefix.base),
    )
    .sort((a, b) => b.prefix.length - a.prefix.length)[0];
}

/** Whether any route leaves through `device`. */
export const uses = (state: DesiredState, device: string): boolean => state.routes.some((route) => route.dev === device);

/** Routes per kind, for the metrics. */
export function countsOf(state: DesiredState): Record<RouteKind, number> {
  const counts: Record<RouteKind, number> = { direct: 0, ipip: 0, vxlan: 0 };
  for (const route of state.routes) counts[route.kind]++;
  return counts;
}
