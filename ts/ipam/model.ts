// What address management stores, and where. The layout follows the reference's (keys and field
// names), under /netplug/ instead of /calico/: tools that know one can read the other.
import { formatPrefix, parsePrefix, type Family, type Prefix } from './cidr.ts';

export const API_VERSION = 'projectnet.org/v3';
const RESOURCES = '/netplug/resources/v3/projectnet.org';
const IPAM = '/netplug/ipam/v2';

export type EncapsulationMode = 'Never' | 'Always' | 'CrossSubnet';

export interface PoolSpec {
  cidr: string;
  blockSize: number;
  nodeSelector: string;
  ipipMode: EncapsulationMode;
  vxlanMode: EncapsulationMode;
  natOutgoing: boolean;
  disabled: boolean;
}

export interface PoolResource {
  kind: 'IPPool';
  apiVersion: string;
  metadata: { name: string; creationTimestamp: string };
  spec: PoolSpec;
}

export interface NodeResource {
  kind: 'Node';
  apiVersion: string;
  metadata: { name: string; creationTimestamp: string; labels: Record<string, string> };
  spec: Record<string, never>;
}

/** Who holds an address: the handle, and where and when it was taken. */
export interface AllocationAttribute {
  handle_id: string;
  secondary: Record<string, string>;
}

/** A block of a pool, affine to the node that claimed it. */
export interface Block {
  cidr: string;
  /** `host:<node>`, or null once no node owns it. */
  affinity: string | null;
  affinityClaimTime?: string;
  /** Per ordinal: an index into `attributes`, or null when free. */
  allocations: (number | null)[];
  /** Free ordinals in the order they are handed out; released ones go to the back. */
  unallocated: number[];
  attributes: AllocationAttribute[];
  sequenceNumber: number;
  deleted: boolean;
}

/** The blocks a handle (`<network>.<container ID>`) holds addresses in, with how many. */
export interface Handle {
  handleID: string;
  block: Record<string, number>;
  deleted: boolean;
}

/**
 * An ADD that lost the race for its node's block, waiting for the next winner to allocate for it
 * too (one commit then serves many: a burst of pods on a node does not queue behind one key).
 */
export interface PendingRequest {
  handle: string;
  attributes: Record<string, string>;
  requests: { family: Family; pools: string[] }[];
  created: string;
}

export interface Affinity {
  state: 'confirmed';
  deleted: boolean;
}

export const keys = {
  pools: `${RESOURCES}/ippools/`,
  pool: (name: string) => `${RESOURCES}/ippools/${name}`,
  nodes: `${RESOURCES}/nodes/`,
  node: (name: string) => `${RESOURCES}/nodes/${name}`,
  workloadEndpoints: `${RESOURCES}/workloadendpoints/`,
  workloadEndpoint: (namespace: string, name: string) => `${RESOURCES}/workloadendpoints/${namespace}/${name}`,
  blocks: (family: Family) => `${IPAM}/assignment/ipv${family}/block/`,
  block: (cidr: string) => `${IPAM}/assignment/ipv${familyOf(cidr)}/block/${cidr.replace('/', '-')}`,
  /** Every node's affinities. */
  allAffinities: `${IPAM}/host/`,
  affinities: (node: string, family: Family) => `${IPAM}/host/${node}/ipv${family}/block/`,
  affinity: (node: string, cidr: string) => `${IPAM}/host/${node}/ipv${familyOf(cidr)}/block/${cidr.replace('/', '-')}`,
  pending: (node: string) => `${IPAM}/pending/${node}/`,
  pendingRequest: (node: string, handle: string) => `${IPAM}/pending/${node}/${handle}`,
  handles: `${IPAM}/handle/`,
  handle: (id: string) => `${IPAM}/handle/${id}`,
};

/** The block CIDR at the end of a block or affinity key. */
export function cidrOfKey(key: string): string {
  const last = key.slice(key.lastIndexOf('/') + 1);
  const dash = last.lastIndexOf('-');
  return `${last.slice(0, dash)}/${last.slice(dash + 1)}`;
}

export function familyOf(cidr: string): Family {
  return cidr.includes(':') ? 6 : 4;
}

export function prefixOf(cidr: string): Prefix {
  const prefix = parsePrefix(cidr);
  if (!prefix) throw new Error(`${cidr} is not a CIDR`);
  return prefix;
}

export const canonical = (cidr: string): string => formatPrefix(prefixOf(cidr));

/** The handle of a network attachment, as the reference names it. */
export const handleId = (network: string, containerId: string): string => `${network}.${containerId}`;

export const hostAffinity = (node: string): string => `host:${node}`;
