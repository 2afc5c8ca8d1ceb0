// Documents as read back, checked. Anyone with access to the datastore can write a document
// netplug cannot use (by hand, with another tool, an older schema): each is checked where it is
// read, and a bad one is reported by kind, name, key and field (error 7, not "try again": it stays
// broken until an administrator repairs or removes it), never as a crash deep in the allocator.
// Fields the reference leaves out when at their defaults get those defaults.
import { describeValue } from '../log/echo.ts';
import type { Entry } from './entry.ts';
import { formatPrefix, parseIp, parsePrefix, widthOf, type Family, type Prefix } from '../net/cidr.ts';
import { brokenDocument, canonical, cidrOfKey } from './keys.ts';
import { ENCAPSULATION_MODES, type EncapsulationMode, type PoolResource, type PoolSpec } from './ip-pool.ts';
import type { Block, Handle, PendingRequest } from './ipam-documents.ts';
import type { NodeSpec } from './node.ts';
import { parseSelector, SelectorError } from '../selectors/parse.ts';

/** The smallest block (the most addresses) a pool may have, per family; and the largest a block array may be. */
const MIN_BLOCK_SIZE: Record<Family, number> = { 4: 20, 6: 116 };

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
const isCount = (value: unknown): value is number => Number.isInteger(value) && (value as number) >= 0;

/** A text for a message, cut short: a document may hold megabytes. */
const cut = (text: string, most = 160) => (text.length > most ? `${text.slice(0, most)}…` : text);
const echo = (value: unknown): string => describeValue(value, 64);

const wanted = (key: string, field: string, what: string, got: unknown) =>
  brokenDocument(key, `field "${field}"`, `must be ${what}, got ${echo(got)}`);

function optional<T>(key: string, spec: Json, field: string, what: string, ok: (v: unknown) => boolean, fallback: T): T {
  const value = spec[field];
  if (value === undefined || value === null) return fallback;
  if (!ok(value)) throw wanted(key, `spec.${field}`, what, value);
  return value as T;
}

/** A pool as netplug uses it, with the reference's defaults for fields left out. */
export function checkedPool(entry: Entry<unknown>): Entry<PoolResource> {
  const { key, value } = entry;
  if (!isObject(value)) throw wanted(key, '.', 'an object', value);
  const { metadata, spec } = value;
  if (!isObject(metadata) || typeof metadata['name'] !== 'string' || metadata['name'] === '')
    throw wanted(key, 'metadata.name', 'a name', isObject(metadata) ? metadata['name'] : metadata);
  if (!isObject(spec)) throw wanted(key, 'spec', 'an object', spec);
  const prefix = typeof spec['cidr'] === 'string' ? parsePrefix(spec['cidr']) : undefined;
  if (!prefix) throw wanted(key, 'spec.cidr', 'a CIDR', spec['cidr']);
  const [least, most] = [Math.max(MIN_BLOCK_SIZE[prefix.family], prefix.length), widthOf(prefix.family)];
  const blockSize = spec['blockSize'];
  if (!Number.isInteger(blockSize) || (blockSize as number) < least || (blockSize as number) > most)
    throw wanted(key, 'spec.blockSize', `a whole number from ${least} to ${most} (for ${spec['cidr']})`, blockSize);
  const nodeSelector = optional(key, spec, 'nodeSelector', 'a selector', (v) => typeof v === 'string', 'all()');
  try {
    parseSelector(nodeSelector);
  } catch (err) {
    if (err instanceof SelectorError) throw brokenDocument(key, 'field "spec.nodeSelector"', `is not a selector: ${cut(err.message)}`);
    throw err;
  }
  const mode = (v: unknown) => ENCAPSULATION_MODES.includes(v as EncapsulationMode);
  const modes = `one of ${ENCAPSULATION_MODES.join(', ')}`;
  const flag = (v: unknown) => typeof v === 'boolean';
  const checked: PoolSpec = {
    ...(spec as unknown as PoolSpec),
    nodeSelector,
    ipipMode: optional(key, spec, 'ipipMode', modes, mode, 'Never'),
    vxlanMode: optional(key, spec, 'vxlanMode', modes, mode, 'Never'),
    natOutgoing: optional(key, spec, 'natOutgoing', 'true or false', flag, false),
    disabled: optional(key, spec, 'disabled', 'true or false', flag, false),
  };
  return { ...entry, value: { ...(value as unknown as PoolResource), spec: checked } };
}

/** A block whose arrays agree with its CIDR, so that ordinals and attribute indices stay in range. */
export function checkedBlock(entry: Entry<unknown>): Entry<Block> {
  const { key, value } = entry;
  if (!isObject(value)) throw wanted(key, '.', 'an object', value);
  const prefix = typeof value['cidr'] === 'string' ? parsePrefix(value['cidr'], true) : undefined;
  if (!prefix) throw wanted(key, 'cidr', 'a block CIDR', value['cidr']);
  if (canonical(cidrOfKey(key)) !== formatPrefix(prefix))
    throw wanted(key, 'cidr', `the CIDR its key names, ${cidrOfKey(key)}`, value['cidr']);
  const bits = widthOf(prefix.family) - prefix.length;
  if (bits > widthOf(prefix.family) - MIN_BLOCK_SIZE[prefix.family])
    throw wanted(key, 'cidr', 'a block of at most 4096 addresses', value['cidr']);
  const count = 2 ** bits;
  const { affinity, allocations, unallocated, attributes } = value;
  if (affinity !== undefined && affinity !== null && typeof affinity !== 'string')
    throw wanted(key, 'affinity', 'host:<node> or null', affinity);
  if (!Array.isArray(attributes)) throw wanted(key, 'attributes', 'a list', attributes);
  attributes.forEach((a, i) => {
    if (!isObject(a) || typeof a['handle_id'] !== 'string')
      throw wanted(key, `attributes[${i}].handle_id`, 'a handle', isObject(a) ? a['handle_id'] : a);
    if (!isObject(a['secondary']) || !Object.values(a['secondary']).every((v) => typeof v === 'string'))
      throw wanted(key, `attributes[${i}].secondary`, 'an object of strings', a['secondary']);
  });
  if (!Array.isArray(allocations) || allocations.length !== count)
    throw wanted(key, 'allocations', `a list of ${count} entries (one per address of ${value['cidr']})`, allocations);
  allocations.forEach((a, i) => {
    if (a !== null && !(isCount(a) && a < attributes.length))
      throw wanted(key, `allocations[${i}]`, `null or an index into attributes (0 to ${attributes.length - 1})`, a);
  });
  if (!Array.isArray(unallocated)) throw wanted(key, 'unallocated', 'a list', unallocated);
  unallocated.forEach((u, i) => {
    if (!(isCount(u) && u < count)) throw wanted(key, `unallocated[${i}]`, `an ordinal from 0 to ${count - 1}`, u);
  });
  const sequenceNumber = value['sequenceNumber'] ?? 0;
  if (!isCount(sequenceNumber)) throw wanted(key, 'sequenceNumber', 'a whole number', sequenceNumber);
  return {
    ...entry,
    value: { ...(value as unknown as Block), affinity: affinity ?? null, sequenceNumber, deleted: value['deleted'] === true },
  };
}

export function checkedHandle(entry: Entry<unknown>): Entry<Handle> {
  const { key, value } = entry;
  if (!isObject(value)) throw wanted(key, '.', 'an object', value);
  const { block } = value;
  if (!isObject(block)) throw wanted(key, 'block', 'an object of block CIDR to address count', block);
  for (const [cidr, count] of Object.entries(block)) {
    if (!parsePrefix(cidr, true)) throw brokenDocument(key, `field "block"`, `must have block CIDRs as keys, got ${echo(cidr)}`);
    if (!isCount(count)) throw wanted(key, `block["${cidr}"]`, 'a count of addresses', count);
  }
  return {
    ...entry,
    value: { ...(value as unknown as Handle), block: block as Record<string, number>, deleted: value['deleted'] === true },
  };
}

/** A node's labels (what pool selectors match), from its datastore document. */
export function checkedNodeLabels(entry: Entry<unknown>): Record<string, string> {
  const { key, value } = entry;
  if (!isObject(value)) throw wanted(key, '.', 'an object', value);
  const metadata = value['metadata'];
  if (metadata === undefined || metadata === null) return {};
  if (!isObject(metadata)) throw wanted(key, 'metadata', 'an object', metadata);
  const labels = metadata['labels'];
  if (labels === undefined || labels === null) return {};
  if (!isObject(labels) || !Object.values(labels).every((v) => typeof v === 'string'))
    throw wanted(key, 'metadata.labels', 'an object of strings', labels);
  return labels as Record<string, string>;
}

/** A node's pod CIDRs (status.podCIDRs, on the Kubernetes datastore), each in canonical form. */
export function checkedNodePodCidrs(entry: Entry<unknown>): string[] {
  const { key, value } = entry;
  if (!isObject(value)) throw wanted(key, '.', 'an object', value);
  const status = value['status'];
  if (status === undefined || status === null) return [];
  if (!isObject(status)) throw wanted(key, 'status', 'an object', status);
  const cidrs = status['podCIDRs'];
  if (cidrs === undefined || cidrs === null) return [];
  const prefixes = Array.isArray(cidrs) ? cidrs.map((cidr) => (typeof cidr === 'string' ? parsePrefix(cidr) : undefined)) : [];
  if (!Array.isArray(cidrs) || prefixes.includes(undefined)) throw wanted(key, 'status.podCIDRs', 'a list of CIDRs', cidrs);
  return (prefixes as Prefix[]).map(formatPrefix);
}

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i;

/** A node's addresses (spec), each field checked: a broken one is an error naming it. */
export function checkedNodeSpec(entry: Entry<unknown>): NodeSpec {
  const { key, value } = entry;
  if (!isObject(value)) throw wanted(key, '.', 'an object', value);
  const spec = value['spec'];
  if (spec === undefined || spec === null) return {};
  if (!isObject(spec)) throw wanted(key, 'spec', 'an object', spec);
  const bgp = spec['bgp'];
  if (bgp !== undefined && bgp !== null && !isObject(bgp)) throw wanted(key, 'spec.bgp', 'an object', bgp);
  const field = (from: Json | undefined, path: string, name: string, what: string, ok: (text: string) => boolean) => {
    const given = from?.[name];
    if (given === undefined || given === null || given === '') return undefined;
    if (typeof given !== 'string' || !ok(given)) throw wanted(key, path, what, given);
    return given;
  };
  const v4 = (text: string) => parseIp(text)?.family === 4;
  const ipv4Address = field(bgp ?? undefined, 'spec.bgp.ipv4Address', 'ipv4Address', 'an IPv4 address with its prefix length', (text) => {
    const slash = text.indexOf('/');
    return slash > 0 && v4(text.slice(0, slash)) && parsePrefix(text)?.family === 4;
  });
  const ipv6Address = field(bgp ?? undefined, 'spec.bgp.ipv6Address', 'ipv6Address', 'an IPv6 address with its prefix length', (text) => {
    const slash = text.indexOf('/');
    return slash > 0 && parseIp(text.slice(0, slash))?.family === 6 && parsePrefix(text)?.family === 6;
  });
  const ipip = field(bgp ?? undefined, 'spec.bgp.ipv4IPIPTunnelAddr', 'ipv4IPIPTunnelAddr', 'an IPv4 address', v4);
  const vxlan = field(spec, 'spec.ipv4VXLANTunnelAddr', 'ipv4VXLANTunnelAddr', 'an IPv4 address', v4);
  const mac = field(spec, 'spec.vxlanTunnelMACAddr', 'vxlanTunnelMACAddr', 'a MAC address', (text) => MAC.test(text));
  const vxlan6 = field(spec, 'spec.ipv6VXLANTunnelAddr', 'ipv6VXLANTunnelAddr', 'an IPv6 address', (text) => parseIp(text)?.family === 6);
  const mac6 = field(spec, 'spec.vxlanTunnelMACAddrV6', 'vxlanTunnelMACAddrV6', 'a MAC address', (text) => MAC.test(text));
  return {
    ...(ipv4Address || ipv6Address || ipip
      ? {
          bgp: {
            ...(ipv4Address ? { ipv4Address } : {}),
            ...(ipv6Address ? { ipv6Address } : {}),
            ...(ipip ? { ipv4IPIPTunnelAddr: ipip } : {}),
          },
        }
      : {}),
    ...(vxlan ? { ipv4VXLANTunnelAddr: vxlan } : {}),
    ...(mac ? { vxlanTunnelMACAddr: mac.toLowerCase() } : {}),
    ...(vxlan6 ? { ipv6VXLANTunnelAddr: vxlan6 } : {}),
    ...(mac6 ? { vxlanTunnelMACAddrV6: mac6.toLowerCase() } : {}),
  };
}

/** Whether a pending request can be served; one that cannot is dropped as if it had gone stale. */
export function isPendingRequest(value: unknown): value is PendingRequest {
  return (
    isObject(value) &&
    typeof value['handle'] === 'string' &&
    isObject(value['attributes']) &&
    typeof value['created'] === 'string' &&
    Array.isArray(value['requests']) &&
    value['requests'].every(
      (r) =>
        isObject(r) &&
        (r['family'] === 4 || r['family'] === 6) &&
        Array.isArray(r['pools']) &&
        r['pools'].every((p) => typeof p === 'string'),
    )
  );
}

export const checkedBlocks = (entries: readonly Entry<unknown>[]): Entry<Block>[] => entries.map(checkedBlock);
export const checkedOrAbsent = <T>(check: (e: Entry<unknown>) => Entry<T>, entry: Entry<unknown> | undefined): Entry<T> | undefined =>
  entry && check(entry);
