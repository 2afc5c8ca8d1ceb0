// Everything address management stores, read once, for netplugctl's ipam show and check. Reads
// only: inspecting never locks the datastore or holds up allocations.
import { addressOf, attributeAt } from '../ipam/block.ts';
import { contains, parseIp, parsePrefix, size, type Prefix } from '../net/cidr.ts';
import { cidrOfKey, keys } from '../model/keys.ts';
import type { AllocationAttribute, Block, Handle } from '../model/ipam-documents.ts';
import { checkedBlock, checkedHandle } from '../model/checked-documents.ts';
import { blockInPool, listPools, type Pool } from '../ipam/pools.ts';
import type { WorkloadEndpoint } from '../model/workload-endpoint.ts';
import type { Entry, Store } from '../store/store.ts';

export interface IpamState {
  pools: Pool[];
  blocks: Entry<Block>[];
  handles: Map<string, Handle>;
  /** `<node>` → block CIDRs it has an affinity key for. */
  affinities: Map<string, string[]>;
  /** `<namespace>/<name>` → endpoint. */
  endpoints: Map<string, WorkloadEndpoint>;
}

export interface HeldAddress {
  address: string;
  block: Block;
  ordinal: number;
  attribute: AllocationAttribute;
}

export async function readIpamState(store: Store): Promise<IpamState> {
  const [pools, v4, v6, handles, affinityKeys, endpoints] = await Promise.all([
    listPools(store),
    store.list(keys.blocks(4)),
    store.list(keys.blocks(6)),
    store.list(keys.handles),
    store.listKeys(keys.allAffinities),
    store.list<WorkloadEndpoint>(keys.workloadEndpoints),
  ]);
  const affinities = new Map<string, string[]>();
  for (const key of affinityKeys) {
    const node = key.slice(keys.allAffinities.length).split('/')[0] as string;
    affinities.set(node, [...(affinities.get(node) ?? []), cidrOfKey(key)]);
  }
  return {
    pools,
    // A document that cannot be read is reported by name, not taken apart half-way.
    blocks: [...v4, ...v6].map(checkedBlock),
    handles: new Map(handles.map((e) => [e.key.slice(keys.handles.length), checkedHandle(e).value])),
    affinities,
    endpoints: new Map(endpoints.map((e) => [`${e.value.metadata.namespace}/${e.value.metadata.name}`, e.value])),
  };
}

/** Every allocated address, block by block. */
export function* heldAddresses(state: IpamState): Generator<HeldAddress> {
  for (const { value: block } of state.blocks) {
    for (let ordinal = 0; ordinal < block.allocations.length; ordinal++) {
      const attribute = attributeAt(block, ordinal);
      if (attribute) yield { address: addressOf(block, ordinal), block, ordinal, attribute };
    }
  }
}

export function poolOfBlock(state: IpamState, cidr: string): Pool | undefined {
  return state.pools.find((pool) => blockInPool(cidr, pool));
}

export function poolOfAddress(state: IpamState, ip: string): Pool | undefined {
  const parsed = parseIp(ip);
  return parsed && state.pools.find((pool) => contains(pool.prefix, parsed.family, parsed.value));
}

export function blockOfAddress(state: IpamState, ip: string): Block | undefined {
  const parsed = parseIp(ip);
  return parsed && state.blocks.map((e) => e.value).find((b) => contains(parsePrefix(b.cidr) as Prefix, parsed.family, parsed.value));
}

/** The node a block is affine to, from its `host:<node>`. */
export const affineNode = (block: Block): string | undefined => (block.affinity?.startsWith('host:') ? block.affinity.slice(5) : undefined);

export const poolSize = (pool: Pool): bigint => size(pool.prefix);
