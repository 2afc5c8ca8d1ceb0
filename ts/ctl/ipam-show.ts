// netplugctl ipam show [--ip IP]: usage per pool and block, or who holds one address and since when.
import { allocatedCount, attributeAt, ordinalOf } from '../ipam/block.ts';
import { parseIp } from '../net/cidr.ts';
import type { Store } from '../store/store.ts';
import { affineNode, blockOfAddress, poolOfAddress, poolOfBlock, poolSize, readIpamState, type IpamState } from './ipam-state.ts';
import { details, table } from './table.ts';
import { refused, UsageError } from './usage.ts';

export async function showIpam(store: Store, json: boolean): Promise<string> {
  const state = await readIpamState(store);
  const pools = state.pools.map((pool) => {
    const blocks = state.blocks
      .map((e) => e.value)
      .filter((block) => poolOfBlock(state, block.cidr) === pool)
      .map((block) => ({
        cidr: block.cidr,
        node: affineNode(block) ?? null,
        allocated: allocatedCount(block),
        free: block.unallocated.length,
      }));
    const allocated = blocks.reduce((sum, b) => sum + b.allocated, 0);
    const total = poolSize(pool);
    // JSON numbers: exact up to 2^53 addresses, which every IPv4 pool is; the table is exact always.
    return {
      name: pool.name,
      cidr: pool.spec.cidr,
      size: Number(total),
      allocated,
      free: Number(total - BigInt(allocated)),
      disabled: pool.spec.disabled,
      blocks,
      total,
    };
  });
  if (json) return `${JSON.stringify({ pools: pools.map(({ total: _, ...pool }) => pool) }, null, 2)}\n`;
  const blocks = pools.flatMap((pool) => pool.blocks.map((b) => [b.cidr, pool.name, b.node ?? '(none)', b.allocated, b.free]));
  if (pools.length === 0) return `no pools; create one with netplugctl pool create NAME --cidr CIDR\n`;
  const summary = table(
    ['POOL', 'CIDR', 'SIZE', 'ALLOCATED', 'FREE'],
    pools.map((p) => [p.name, p.cidr, String(p.total), p.allocated, String(p.total - BigInt(p.allocated))]),
  );
  return blocks.length === 0
    ? `${summary}\nno blocks claimed yet\n`
    : `${summary}\n${table(['BLOCK', 'POOL', 'NODE', 'ALLOCATED', 'FREE'], blocks)}`;
}

/** Who holds `ip` (its handle, node, workload, interface, since when), or that it is free. */
export async function showAddress(store: Store, ip: string, json: boolean, now = new Date()): Promise<string> {
  if (!parseIp(ip)) throw new UsageError(`--ip "${ip}" is not an IP address`);
  const state = await readIpamState(store);
  const pool = poolOfAddress(state, ip);
  if (!pool) throw refused(`${ip} is not in any pool`);
  const block = blockOfAddress(state, ip);
  const attribute = block && attributeAt(block, ordinalOf(block, ip) as number);
  const secondary = attribute?.secondary ?? {};
  const endpoint = secondary['endpoint'] ?? endpointHolding(state, ip);
  const report = {
    ip,
    pool: pool.name,
    block: block?.cidr ?? null,
    blockNode: (block && affineNode(block)) ?? null,
    allocated: attribute !== undefined,
    handle: attribute?.handle_id ?? null,
    node: secondary['node'] ?? null,
    interface: secondary['ifname'] ?? null,
    namespace: secondary['namespace'] ?? null,
    pod: secondary['pod'] ?? null,
    since: secondary['timestamp'] ?? null,
    workloadEndpoint: endpoint ?? null,
    workloadEndpointExists: endpoint ? state.endpoints.has(endpoint) : false,
  };
  if (json) return `${JSON.stringify(report, null, 2)}\n`;
  return details([
    ['address', ip],
    ['pool', `${pool.name} (${pool.spec.cidr})`],
    ['block', block ? `${block.cidr}${report.blockNode ? `, affine to node ${report.blockNode}` : ''}` : 'not claimed by any node yet'],
    ['state', attribute ? 'allocated' : 'free'],
    ['handle', report.handle ?? undefined],
    ['node', report.node ?? undefined],
    ['pod', report.pod ? `${report.namespace}/${report.pod}` : undefined],
    ['interface', report.interface ?? undefined],
    ['since', report.since ? `${report.since} (${age(report.since, now)} ago)` : undefined],
    ['endpoint', endpoint ? `${endpoint}${report.workloadEndpointExists ? '' : ' (missing)'}` : undefined],
  ]);
}

function endpointHolding(state: IpamState, ip: string): string | undefined {
  for (const [name, endpoint] of state.endpoints) {
    if (endpoint.spec.ipNetworks.some((network) => network.split('/')[0] === ip)) return name;
  }
  return undefined;
}

export function age(timestamp: string, now: Date): string {
  const seconds = Math.max(0, Math.round((now.getTime() - Date.parse(timestamp)) / 1000));
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86400)}d`;
}
