// One read of what routes, NAT and the node's addresses are computed from: every node (its labels,
// published addresses and, on the Kubernetes datastore, pod CIDRs), every block (its affinity
// and the nodes its addresses went to), every pool, and where each workload runs with its
// addresses and floating IPs (workloads.ts), in one round trip on etcd. A broken document costs
// only itself: it is skipped and named in `broken`.
import { attributeAt, addressOf } from '../../ipam/block.ts';
import { keys } from '../../model/keys.ts';
import type { NodeSpec } from '../../model/node.ts';
import { checkedBlock, checkedNodeLabels, checkedNodePodCidrs, checkedNodeSpec } from '../../model/checked-documents.ts';
import { poolsOf, type Pool } from '../../ipam/pools.ts';
import type { Entry, Store } from '../../store/store.ts';
import { type RoutedWorkload, workloadOf } from './workloads.ts';

export type { RoutedWorkload };

export interface NodeAddresses {
  name: string;
  /** The underlay address and its prefix length; undefined until the node published it. */
  address?: { address: string; prefixLength: number };
  /** The IPv6 underlay address likewise (a node with IP6 set): IPv6 blocks are routed through it. */
  address6?: { address: string; prefixLength: number };
  ipipTunnelAddr?: string;
  vxlanTunnelAddr?: string;
  vxlanMac?: string;
  /** The IPv6 VXLAN device's address and MAC (IPv6 pools with VXLAN). */
  vxlanTunnelAddr6?: string;
  vxlanMac6?: string;
  /** Its pod CIDRs (Kubernetes datastore only): what host-local installs route by. */
  podCidrs?: string[];
}

export interface RoutedBlock {
  cidr: string;
  /** The node the block is affine to; undefined when none (released, or not `host:`). */
  node: string | undefined;
  /** Addresses allocated to another node than the block's (its attribute's `node`). */
  borrowed: { address: string; node: string }[];
}

export interface ClusterState {
  nodes: (NodeAddresses & { labels: Record<string, string>; spec: NodeSpec })[];
  blocks: RoutedBlock[];
  pools: Pool[];
  /** Every workload that has addresses on a node: for host routes outside the blocks, and floating IPs. */
  workloads: RoutedWorkload[];
  /** The addresses each tunnel handle holds, from the blocks (no handle document read). */
  tunnelAddresses: Map<string, string[]>;
  broken: string[];
}

const TUNNEL_HANDLE = /^(ipip|vxlan|vxlan-v6)-tunnel-addr-/;

/**
 * Each workload entry as read, while the entry lives: the followed cluster keeps an entry until it
 * changes, and every pass reads every pod of the cluster.
 */
const workloadsRead = new WeakMap<Entry<unknown>, { workload?: RoutedWorkload | undefined; broken?: string }>();

/** Where routes and addresses are computed from: nodes, blocks, pools, workload endpoints (read together here; followed: cluster-feed.ts). */
const CLUSTER_PREFIXES = [keys.nodes, keys.blocks(4), keys.blocks(6), keys.pools, keys.workloadEndpoints] as const;

export async function readCluster(store: Store): Promise<ClusterState> {
  const [nodeEntries, blocks4, blocks6, poolEntries, endpointEntries] = (await store.read(
    CLUSTER_PREFIXES.map((list) => ({ list })),
  )) as Entry<unknown>[][];
  return clusterStateOf(nodeEntries ?? [], [...(blocks4 ?? []), ...(blocks6 ?? [])], poolEntries ?? [], endpointEntries ?? []);
}

/** The state the entries under CLUSTER_PREFIXES make (both blocks' lists in one), each list in key order. */
export function clusterStateOf(
  nodeEntries: Entry<unknown>[],
  blockEntries: Entry<unknown>[],
  poolEntries: Entry<unknown>[],
  workloadEntries: Entry<unknown>[] = [],
): ClusterState {
  const broken: string[] = [];
  const checked = <T>(check: () => T): T | undefined => {
    try {
      return check();
    } catch (err) {
      broken.push((err as Error).message);
      return undefined;
    }
  };
  const nodes = nodeEntries.flatMap((entry) => {
    const name = entry.key.slice(keys.nodes.length);
    const spec = checked(() => checkedNodeSpec(entry));
    const labels = checked(() => checkedNodeLabels(entry));
    if (!spec || !labels) return [];
    const podCidrs = checked(() => checkedNodePodCidrs(entry)) ?? [];
    const [address, length] = spec.bgp?.ipv4Address?.split('/') ?? [];
    const [address6, length6] = spec.bgp?.ipv6Address?.split('/') ?? [];
    return [
      {
        name,
        labels,
        spec,
        ...(address && length ? { address: { address, prefixLength: Number(length) } } : {}),
        ...(address6 && length6 ? { address6: { address: address6, prefixLength: Number(length6) } } : {}),
        ...(spec.bgp?.ipv4IPIPTunnelAddr ? { ipipTunnelAddr: spec.bgp.ipv4IPIPTunnelAddr } : {}),
        ...(spec.ipv4VXLANTunnelAddr ? { vxlanTunnelAddr: spec.ipv4VXLANTunnelAddr } : {}),
        ...(spec.vxlanTunnelMACAddr ? { vxlanMac: spec.vxlanTunnelMACAddr } : {}),
        ...(spec.ipv6VXLANTunnelAddr ? { vxlanTunnelAddr6: spec.ipv6VXLANTunnelAddr } : {}),
        ...(spec.vxlanTunnelMACAddrV6 ? { vxlanMac6: spec.vxlanTunnelMACAddrV6 } : {}),
        ...(podCidrs.length > 0 ? { podCidrs } : {}),
      },
    ];
  });
  const tunnelAddresses = new Map<string, string[]>();
  const blocks = blockEntries.flatMap((entry) => {
    const block = checked(() => checkedBlock(entry).value);
    if (!block || block.deleted) return [];
    const node = block.affinity?.startsWith('host:') ? block.affinity.slice('host:'.length) : undefined;
    const borrowed: RoutedBlock['borrowed'] = [];
    block.allocations.forEach((index, ordinal) => {
      const attribute = index === null ? undefined : attributeAt(block, ordinal);
      const holder = attribute?.secondary['node'];
      if (holder && holder !== node) borrowed.push({ address: addressOf(block, ordinal), node: holder });
      if (attribute && TUNNEL_HANDLE.test(attribute.handle_id))
        tunnelAddresses.set(attribute.handle_id, [...(tunnelAddresses.get(attribute.handle_id) ?? []), addressOf(block, ordinal)]);
    });
    return [{ cidr: block.cidr, node, borrowed }];
  });
  // Pool by pool, so that a broken one is named once and the others still count.
  const pools = poolsOf(poolEntries.filter((entry) => checked(() => poolsOf([entry])) !== undefined));
  const workloads = workloadEntries.flatMap((entry) => {
    let read = workloadsRead.get(entry);
    if (!read) {
      try {
        read = { workload: workloadOf(entry) };
      } catch (err) {
        read = { broken: (err as Error).message };
      }
      workloadsRead.set(entry, read);
    }
    if (read.broken !== undefined) broken.push(read.broken);
    return read.workload ?? [];
  });
  return { nodes, blocks, pools, workloads, tunnelAddresses, broken };
}
