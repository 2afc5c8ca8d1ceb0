// Routes between nodes: tunnel devices, the main table's routes of one rtnetlink protocol, and
// the neighbour and FDB entries a VXLAN overlay needs. Every call acts on the calling process's
// network namespace (netplug-node runs in the node's), on a thread of the addon, and is
// level-triggered: it makes the kernel match what it is given, so calling it again with the same
// input changes nothing.
import { addon } from '../native/addon.ts';
import type { KernelError } from '../native/binding.d.ts';
import { DataplaneError } from './errors.ts';

/** The rtnetlink protocol number netplug marks its routes with (`ip route show proto 80`). */
export const NETPLUG_ROUTE_PROTOCOL = 80;

export interface IpipDeviceSpec {
  name: string;
  mtu?: number;
  /** A /32 (`10.0.0.1` or `10.0.0.1/32`): the device's only IPv4 address. */
  address?: string;
}

export interface VxlanDeviceSpec {
  name: string;
  vni: number;
  /** The UDP port (4789 is IANA's). */
  port: number;
  /** The node's underlay address the encapsulated packets leave from (IPv4 or IPv6). */
  local: string;
  mtu?: number;
  /** Set when given (so it survives a re-creation); the kernel picks one otherwise. */
  mac?: string;
  /** A /32 (or a /128 on an IPv6 device): the device's only address of its family. */
  address?: string;
}

export interface SyncRoute {
  /** A CIDR (`10.244.1.0/26`, `fd00::/122`); a bare address is a host route. */
  dst: string;
  via?: string;
  dev: string;
  /** Treat `via` as reachable on `dev` whatever its addresses (IP-in-IP and VXLAN next hops). */
  onlink?: boolean;
  /** The preferred source address for traffic the node itself sends along the route. */
  src?: string;
}

export interface RouteSyncCounts {
  added: number;
  replaced: number;
  removed: number;
  unchanged: number;
}

export interface NeighborEntry {
  ip: string;
  mac: string;
}

/** Frames for `mac` go to the VTEP at the underlay address `dst`. */
export interface FdbEntry {
  mac: string;
  dst: string;
}

export interface EntrySyncCounts {
  added: number;
  removed: number;
}

/**
 * An IP-in-IP device (like the kernel's tunl0: no fixed remote) named `name`, up, with `mtu` and,
 * if given, `address` (a /32) set exactly. The kernel allows one such device per namespace and
 * makes `tunl0` itself once the ipip module is loaded, so name it `tunl0`.
 */
export async function ensureIpipDevice(spec: IpipDeviceSpec): Promise<{ ifindex: number }> {
  const outcome = await addon().ensureIpipDevice(spec);
  const { ifindex } = settled(outcome);
  return { ifindex: required(ifindex, 'ensureIpipDevice') };
}

/**
 * A VXLAN device: VNI, UDP port, local address, learning off, up, MTU, MAC (kept if given),
 * address (a /32) set exactly. A device of that name with another VNI, port or local address (or
 * of another kind) is made again.
 */
export async function ensureVxlanDevice(spec: VxlanDeviceSpec): Promise<{ ifindex: number; mac: string }> {
  const outcome = await addon().ensureVxlanDevice(spec);
  const { ifindex, mac } = settled(outcome);
  return { ifindex: required(ifindex, 'ensureVxlanDevice'), mac: required(mac, 'ensureVxlanDevice') };
}

/**
 * Removes the link if present; false when there was none. The kernel's fallback tunnel (`tunl0`)
 * cannot be removed: it is brought down and its addresses removed instead.
 */
export async function deleteLink(name: string): Promise<boolean> {
  const outcome = await addon().deleteLink(name);
  return required(settled(outcome).deleted, 'deleteLink');
}

/**
 * Makes the main table's routes with rtnetlink protocol `protocol` (5-255) exactly `routes` (replace
 * what differs, add what is missing, delete the rest of that protocol); IPv4 and IPv6. A route of
 * another protocol is never touched. Input is checked whole before any change (`EINVAL`, `ENODEV`
 * naming `routes[i].<field>`); routes the kernel refuses (one of another protocol in the way is
 * `EEXIST`, a gateway off every subnet without `onlink` `ENETUNREACH`) fail the call with one error
 * naming each, after every other route is synced.
 */
export async function syncRoutes(protocol: number, routes: SyncRoute[]): Promise<RouteSyncCounts> {
  const outcome = await addon().syncRoutes(protocol, routes);
  return required(settled(outcome).counts, 'syncRoutes');
}

/**
 * Permanent neighbour entries on `dev` made exactly `entries` (other permanent ones on that device
 * removed; entries the kernel learnt stay, unless one holds a wanted address). IPv4 and IPv6.
 */
export async function syncNeighbors(dev: string, entries: NeighborEntry[]): Promise<EntrySyncCounts> {
  const outcome = await addon().syncNeighbors(dev, entries);
  return required(settled(outcome).counts, 'syncNeighbors');
}

/** Permanent bridge FDB entries on the VXLAN device `dev` (MAC → remote underlay address) made exactly `entries`. */
export async function syncFdb(dev: string, entries: FdbEntry[]): Promise<EntrySyncCounts> {
  const outcome = await addon().syncFdb(dev, entries);
  return required(settled(outcome).counts, 'syncFdb');
}

function settled<T extends { error?: KernelError }>(outcome: T): T {
  if (outcome.error) throw new DataplaneError(outcome.error);
  return outcome;
}

function required<T>(value: T | undefined, call: string): T {
  if (value === undefined) throw new Error(`the data-plane addon returned neither a result nor an error from ${call}`);
  return value;
}
