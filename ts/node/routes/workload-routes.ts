// Which workload addresses need a host route of their own (desired-routes.ts programs them): those
// no block already routes to the workload's node (an ipAddrsNoIpam address, chosen outside the
// address manager, perhaps inside another node's block) and floating IPs. Each is routed only when
// it lies in a pool without VXLAN (the specification's rule for ipAddrsNoIpam; a floating IP must
// be in a pool to be advertised); otherwise it is listed as unrouted, with why. Both families: an
// IPv4 address gets a /32, an IPv6 one a /128 through the nodes' IPv6 addresses (desired-routes.ts).
import { parseIp, parsePrefix } from '../../net/cidr.ts';
import type { Pool } from '../../ipam/pools.ts';
import type { RoutedBlock, RoutedWorkload } from '../shared/read-cluster.ts';

export interface Unrouted {
  /** `address 10.0.0.5` or `floating IP 10.0.0.9`. */
  what: string;
  workload: string;
  node: string;
  /** `is in no pool`, `is in pool "p", which uses VXLAN`. */
  why: string;
}

/** How many unrouted addresses a note names before it counts the rest. */
const NAMED = 3;

/** The host routes (`<address>/32` or `/128` to a node) `local` needs for other nodes' workloads, and the addresses left unrouted. */
export function workloadHostRoutes(
  local: string,
  workloads: readonly RoutedWorkload[],
  blocks: readonly RoutedBlock[],
  poolOf: (cidr: string) => Pool | undefined,
): { routes: { dst: string; node: string }[]; unrouted: Unrouted[] } {
  const reaches = blockCoverage(blocks);
  const reaches6 = blockCoverage6(blocks);
  const routes: { dst: string; node: string }[] = [];
  const unrouted: Unrouted[] = [];
  for (const workload of workloads) {
    // This node's pods are reached through their veths; a floating IP of theirs, by NAT here.
    if (workload.node === local) continue;
    const wanted = [
      ...workload.addresses.map((address) => ({ address, what: `address ${address}` })),
      ...workload.floatingIps.map(({ externalIP }) => ({ address: externalIP, what: `floating IP ${externalIP}` })),
    ];
    for (const { address, what } of wanted) {
      const ip = parseIp(address);
      if (!ip) continue;
      if (ip.family === 4 ? reaches(Number(ip.value), workload.node) : reaches6(ip.value, workload.node)) continue;
      const dst = `${address}/${ip.family === 4 ? 32 : 128}`;
      const pool = poolOf(dst);
      const why = !pool
        ? 'is in no pool'
        : pool.spec.vxlanMode === 'Always' || pool.spec.vxlanMode === 'CrossSubnet'
          ? `is in pool "${pool.name}", which uses VXLAN`
          : undefined;
      if (why) unrouted.push({ what, workload: workload.name, node: workload.node, why });
      else routes.push({ dst, node: workload.node });
    }
  }
  return { routes, unrouted };
}

/**
 * Whether a block already routes an IPv4 address (as a number) to a node: the block containing it
 * is affine to the node, or the address is one a block lent. Numbers, not bigints: this runs for
 * every address of every pod of the cluster on each pass.
 */
function blockCoverage(blocks: readonly RoutedBlock[]): (address: number, node: string) => boolean {
  /** Blocks by base × 64 + prefix length. */
  const byBase = new Map<number, RoutedBlock>();
  const lengths = new Set<number>();
  const lent = new Set<number>();
  for (const block of blocks) {
    const prefix = parsePrefix(block.cidr);
    if (prefix?.family !== 4) continue;
    byBase.set(Number(prefix.base) * 64 + prefix.length, block);
    lengths.add(prefix.length);
    for (const { address } of block.borrowed) {
      const ip = parseIp(address);
      if (ip) lent.add(Number(ip.value));
    }
  }
  return (address, node) => {
    if (lent.has(address)) return true;
    for (const length of lengths) {
      const size = 2 ** (32 - length);
      if (byBase.get((address - (address % size)) * 64 + length)?.node === node) return true;
    }
    return false;
  };
}

/** blockCoverage for IPv6 addresses, in bigints: IPv6 blocks are few beside IPv4's, and 128 bits fit no number. */
function blockCoverage6(blocks: readonly RoutedBlock[]): (address: bigint, node: string) => boolean {
  /** Blocks by `<base>/<prefix length>`. */
  const byPrefix = new Map<string, RoutedBlock>();
  const lengths = new Set<number>();
  const lent = new Set<bigint>();
  for (const block of blocks) {
    const prefix = parsePrefix(block.cidr);
    if (prefix?.family !== 6) continue;
    byPrefix.set(`${prefix.base}/${prefix.length}`, block);
    lengths.add(prefix.length);
    for (const { address } of block.borrowed) {
      const ip = parseIp(address);
      if (ip?.family === 6) lent.add(ip.value);
    }
  }
  return (address, node) => {
    if (lent.has(address)) return true;
    for (const length of lengths) {
      const size = 1n << BigInt(128 - length);
      if (byPrefix.get(`${address - (address % size)}/${length}`)?.node === node) return true;
    }
    return false;
  };
}

/** The unrouted addresses as notes, one per reason, naming a few of them. */
export function unroutedNotes(unrouted: readonly Unrouted[]): string[] {
  const byWhy = new Map<string, Unrouted[]>();
  for (const item of unrouted) byWhy.set(item.why, [...(byWhy.get(item.why) ?? []), item]);
  return [...byWhy].map(([why, items]) => {
    const sorted = [...items].sort((a, b) => (a.what < b.what ? -1 : a.what > b.what ? 1 : 0));
    const named = sorted.slice(0, NAMED).map((item) => `${item.what} of ${item.workload} (node "${item.node}")`);
    const more = sorted.length > NAMED ? ` and ${sorted.length - NAMED} more` : '';
    const verb = sorted.length === 1 ? why : why.replace(/^is /, 'are ');
    return `${named.join(', ')}${more} ${verb}: not routed to their node (routes go only to addresses in a pool without VXLAN; route them by other means)`;
  });
}
