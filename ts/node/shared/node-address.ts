// The node's underlay addresses, which other nodes route its pods' blocks through: IPv4 from the
// `IP` setting (as the reference's calico-node takes it), `autodetect` by default, or an explicit
// address with its prefix length; IPv6 likewise from `IP6`, `none` by default (as the reference's:
// a node has an IPv6 address for routes only when asked). The prefix tells same-subnet peers
// (reached directly) from cross-subnet ones (CrossSubnet encapsulation).
import type { NetworkInterfaceInfo } from 'node:os';

import { parseIp, parsePrefix } from '../../net/cidr.ts';

export type AddressSetting = { autodetect: true } | { address: string; prefixLength: number };
/** IP6's: `none` (no IPv6 address published or routed through) besides IP's. */
export type Address6Setting = { none: true } | AddressSetting;

export interface NodeAddress {
  address: string;
  prefixLength: number;
  /** The interface holding it: routes to same-subnet nodes leave through it. */
  interface: string;
  /** How it was chosen, for the log. */
  source: 'IP' | 'IP6' | "the Kubernetes Node's InternalIP" | 'the first address found';
}

/** Parses `IP`; undefined text is autodetect. Throws a one-line message naming the value. */
export function parseAddressSetting(text: string | undefined): AddressSetting {
  if (text === undefined || text.toLowerCase() === 'autodetect') return { autodetect: true };
  const slash = text.indexOf('/');
  const prefix = parsePrefix(text);
  if (slash < 0 || parseIp(text.slice(0, slash))?.family !== 4 || prefix?.family !== 4 || prefix.length === 0)
    throw new Error(`IP "${text.slice(0, 100)}" must be autodetect or an IPv4 address with its prefix length, such as 10.0.0.5/24`);
  return { address: text.slice(0, slash), prefixLength: prefix.length };
}

/** Parses `IP6`; undefined text is none. Throws a one-line message naming the value. */
export function parseAddress6Setting(text: string | undefined): Address6Setting {
  if (text === undefined || text.toLowerCase() === 'none') return { none: true };
  if (text.toLowerCase() === 'autodetect') return { autodetect: true };
  const slash = text.indexOf('/');
  const prefix = parsePrefix(text);
  if (slash < 0 || parseIp(text.slice(0, slash))?.family !== 6 || prefix?.family !== 6 || prefix.length === 0)
    throw new Error(
      `IP6 "${text.slice(0, 100)}" must be none, autodetect or an IPv6 address with its prefix length, such as fd00:30::5/64`,
    );
  return { address: text.slice(0, slash).toLowerCase(), prefixLength: prefix.length };
}

/**
 * Interfaces autodetection skips, by name (the reference's first-found list): the loopback,
 * bridges and veths of container runtimes, and tunnels (netplug's own among them).
 */
const VIRTUAL = [
  /^lo$/,
  /^docker/,
  /^cbr/,
  /^dummy/,
  /^virbr/,
  /^lxcbr/,
  /^veth/,
  /^cali/,
  /^cni/,
  /^tunl/,
  /^vxlan/,
  /^flannel/,
  /^kube-ipvs/,
  /^nodelocaldns/,
  /^podman/,
  /^br-/,
  /^wg/,
];

/** An interface's address, as much of node:os's form of it as autodetection reads. */
type InterfaceAddress = Pick<NetworkInterfaceInfo, 'address' | 'family' | 'internal' | 'cidr'>;

/** The addresses by interface name (node:os's networkInterfaces() is one). */
export type Interfaces = NodeJS.Dict<InterfaceAddress[]>;

/**
 * The address `IP` names, or autodetected: the Kubernetes Node's InternalIP (with the prefix of
 * the interface holding it), else the first global IPv4 address of an up, non-virtual interface
 * (node:os lists only interfaces that are up). Throws a one-line message when there is none.
 */
export function nodeAddress(setting: AddressSetting, internalIps: readonly string[], interfaces: Interfaces): NodeAddress {
  return findAddress(4, setting, internalIps, interfaces);
}

/** The address `IP6` names, or autodetected as `IP` is (IPv6, link-local ones skipped); undefined when IP6 is none. */
export function nodeAddress6(setting: Address6Setting, internalIps: readonly string[], interfaces: Interfaces): NodeAddress | undefined {
  return 'none' in setting ? undefined : findAddress(6, setting, internalIps, interfaces);
}

function findAddress(family: 4 | 6, setting: AddressSetting, internalIps: readonly string[], interfaces: Interfaces): NodeAddress {
  const [name, example] = family === 4 ? ['IP', '10.0.0.5/24'] : ['IP6', 'fd00:30::5/64'];
  const held = Object.entries(interfaces).flatMap(([name, infos]) =>
    (infos ?? []).filter((info) => info.family === `IPv${family}` && !info.internal).map((info) => ({ name, info })),
  );
  const same = (a: string, b: string) => parseIp(a)?.value === parseIp(b)?.value;
  if (!('autodetect' in setting)) {
    const holder = held.find(({ info }) => same(info.address, setting.address));
    if (!holder)
      throw new Error(
        `${name} ${setting.address}/${setting.prefixLength}: no interface of this node holds ${setting.address}; set ${name} to one of its addresses, or to autodetect`,
      );
    return { ...setting, interface: holder.name, source: family === 4 ? 'IP' : 'IP6' };
  }
  for (const ip of internalIps) {
    const found = held.find(({ info }) => parseIp(ip)?.family === family && same(info.address, ip));
    if (found)
      return {
        address: found.info.address,
        prefixLength: prefixLengthOf(found.info),
        interface: found.name,
        source: "the Kubernetes Node's InternalIP",
      };
  }
  const first = held.find(({ name, info }) => !VIRTUAL.some((pattern) => pattern.test(name)) && !isLinkLocal(info.address));
  if (!first)
    throw new Error(
      `${name} is autodetect, but ${internalIps.length > 0 ? `no interface holds the Kubernetes Node's InternalIP (${internalIps.join(', ')}) and ` : ''}no up, non-virtual interface has a global IPv${family} address; set ${name} to the node's address, such as ${example}`,
    );
  return {
    address: first.info.address,
    prefixLength: prefixLengthOf(first.info),
    interface: first.name,
    source: 'the first address found',
  };
}

/** 169.254.0.0/16 and fe80::/10: never a node's address for routes. */
const isLinkLocal = (address: string): boolean => address.startsWith('169.254.') || /^fe[89ab]/i.test(address);

const prefixLengthOf = (info: InterfaceAddress): number => Number(info.cidr?.split('/')[1] ?? (info.family === 'IPv4' ? 32 : 128));

export const formatNodeAddress = (address: { address: string; prefixLength: number }): string =>
  `${address.address}/${address.prefixLength}`;
