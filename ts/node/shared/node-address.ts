// The node's underlay IPv4 address, which other nodes route its pods' blocks through: the `IP`
// setting (as the reference's calico-node takes it), `autodetect` by default, or an explicit
// address with its prefix length. The prefix tells same-subnet peers (reached directly) from
// cross-subnet ones (CrossSubnet encapsulation).
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';

import { parseIp, parsePrefix } from '../../net/cidr.ts';

export type AddressSetting = { autodetect: true } | { address: string; prefixLength: number };

export interface NodeAddress {
  address: string;
  prefixLength: number;
  /** The interface holding it: routes to same-subnet nodes leave through it. */
  interface: string;
  /** How it was chosen, for the log. */
  source: 'IP' | "the Kubernetes Node's InternalIP" | 'the first address found';
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

type Interfaces = NodeJS.Dict<NetworkInterfaceInfo[]>;

/**
 * The address `IP` names, or autodetected: the Kubernetes Node's InternalIP (with the prefix of
 * the interface holding it), else the first global IPv4 address of an up, non-virtual interface
 * (node:os lists only interfaces that are up). Throws a one-line message when there is none.
 */
export function nodeAddress(
  setting: AddressSetting,
  internalIps: readonly string[],
  interfaces: Interfaces = networkInterfaces(),
): NodeAddress {
  const v4 = Object.entries(interfaces).flatMap(([name, infos]) =>
    (infos ?? []).filter((info) => info.family === 'IPv4' && !info.internal).map((info) => ({ name, info })),
  );
  if (!('autodetect' in setting)) {
    const holder = v4.find(({ info }) => info.address === setting.address);
    if (!holder)
      throw new Error(
        `IP ${setting.address}/${setting.prefixLength}: no interface of this node holds ${setting.address}; set IP to one of its addresses, or to autodetect`,
      );
    return { ...setting, interface: holder.name, source: 'IP' };
  }
  for (const ip of internalIps) {
    const found = v4.find(({ info }) => info.address === ip);
    if (found)
      return { address: ip, prefixLength: prefixLengthOf(found.info), interface: found.name, source: "the Kubernetes Node's InternalIP" };
  }
  const first = v4.find(({ name, info }) => !VIRTUAL.some((pattern) => pattern.test(name)) && !info.address.startsWith('169.254.'));
  if (!first)
    throw new Error(
      `IP is autodetect, but ${internalIps.length > 0 ? `no interface holds the Kubernetes Node's InternalIP (${internalIps.join(', ')}) and ` : ''}no up, non-virtual interface has a global IPv4 address; set IP to the node's address, such as 10.0.0.5/24`,
    );
  return {
    address: first.info.address,
    prefixLength: prefixLengthOf(first.info),
    interface: first.name,
    source: 'the first address found',
  };
}

const prefixLengthOf = (info: NetworkInterfaceInfo): number => Number(info.cidr?.split('/')[1] ?? 32);

export const formatNodeAddress = (address: { address: string; prefixLength: number }): string =>
  `${address.address}/${address.prefixLength}`;
