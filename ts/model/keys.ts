// Where netplug's documents live in the datastore. The layout follows the reference's (keys and
// field names), under /netplug/ instead of /calico/: tools that know one can read the other. The
// documents' types are in the files of their kind; how one read back is checked, in
// checked-documents.ts.
import { describeValue } from '../log/echo.ts';
import { formatPrefix, parsePrefix, type Family, type Prefix } from '../net/cidr.ts';
import { badDocument } from './errors.ts';

const RESOURCES = '/netplug/resources/v3/projectnet.org';
const IPAM = '/netplug/ipam/v2';

export const keys = {
  pools: `${RESOURCES}/ippools/`,
  pool: (name: string) => `${RESOURCES}/ippools/${name}`,
  nodes: `${RESOURCES}/nodes/`,
  node: (name: string) => `${RESOURCES}/nodes/${name}`,
  workloadEndpoints: `${RESOURCES}/workloadendpoints/`,
  workloadEndpoint: (namespace: string, name: string) => `${RESOURCES}/workloadendpoints/${namespace}/${name}`,
  /** Every block, of both families. */
  allBlocks: `${IPAM}/assignment/`,
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
  /** Only `default`: which release runs the cluster, and whether the datastore is locked. */
  clusterInformation: `${RESOURCES}/clusterinformations/default`,
  hostEndpoints: `${RESOURCES}/hostendpoints/`,
  hostEndpoint: (name: string) => `${RESOURCES}/hostendpoints/${name}`,
  /** Only `default`: netplug-kube-controllers' configuration. */
  kubeControllersConfiguration: `${RESOURCES}/kubecontrollersconfigurations/default`,
  // Network policy (ts/model/policy.ts): namespaced kinds under `<namespace>/<name>`.
  networkPolicies: `${RESOURCES}/networkpolicies/`,
  networkPolicy: (namespace: string, name: string) => `${RESOURCES}/networkpolicies/${namespace}/${name}`,
  globalNetworkPolicies: `${RESOURCES}/globalnetworkpolicies/`,
  globalNetworkPolicy: (name: string) => `${RESOURCES}/globalnetworkpolicies/${name}`,
  networkSets: `${RESOURCES}/networksets/`,
  networkSet: (namespace: string, name: string) => `${RESOURCES}/networksets/${namespace}/${name}`,
  globalNetworkSets: `${RESOURCES}/globalnetworksets/`,
  globalNetworkSet: (name: string) => `${RESOURCES}/globalnetworksets/${name}`,
  tiers: `${RESOURCES}/tiers/`,
  tier: (name: string) => `${RESOURCES}/tiers/${name}`,
  /** Only on etcd (netplug-kube-controllers writes them); the Kubernetes datastore computes them from namespaces and service accounts. */
  profiles: `${RESOURCES}/profiles/`,
  profile: (name: string) => `${RESOURCES}/profiles/${name}`,
};

/** Whether `key` is a block's (either family). */
export const isBlockKey = (key: string): boolean => key.startsWith(keys.blocks(4)) || key.startsWith(keys.blocks(6));

/** The block CIDR at the end of a block or affinity key; a key that names none is a broken document. */
export function cidrOfKey(key: string): string {
  const last = key.slice(key.lastIndexOf('/') + 1);
  const dash = last.lastIndexOf('-');
  const cidr = `${last.slice(0, dash)}/${last.slice(dash + 1)}`;
  if (dash < 0 || !parsePrefix(cidr, true))
    throw brokenDocument(key, 'its key', `must end in a block CIDR (10.0.0.0-26), got ${describeValue(last, 64)}`);
  return cidr;
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

/** What a key holds, for messages: `IPAMBlock "10.0.0.0-26"`. */
function documentName(key: string): string {
  const last = key.slice(key.lastIndexOf('/') + 1);
  if (key.startsWith(keys.pools)) return `IPPool "${key.slice(keys.pools.length)}"`;
  if (key.startsWith(`${IPAM}/assignment/`)) return `IPAMBlock "${last}"`;
  if (key.startsWith(keys.allAffinities)) return `BlockAffinity "${key.slice(keys.allAffinities.length)}"`;
  if (key.startsWith(keys.handles)) return `IPAMHandle "${key.slice(keys.handles.length)}"`;
  if (key.startsWith(`${IPAM}/pending/`)) return `IPAMPendingRequest "${key.slice(`${IPAM}/pending/`.length)}"`;
  if (key.startsWith(keys.nodes)) return `Node "${last}"`;
  return `document "${last}"`;
}

/** A document netplug cannot use: error 7 naming it, its key, the field and what is wrong. */
export function brokenDocument(key: string, field: string, problem: string) {
  return badDocument(`the datastore's ${documentName(key)} (key ${key}) is broken: ${field} ${problem}; repair or remove it`);
}
