// `"mtu": 0` means auto, as reference-style installers write it when no MTU was chosen: the MTU
// the node agent measured and wrote to a file, else that of the interface the host's default
// route leaves by, else 1500. Read per pod event, from files only (no netlink on this path).
import { readFileSync } from 'node:fs';

/** Written by the node agent; netconf field `mtu_file` (netplug's) names another file. */
export const DEFAULT_MTU_FILE = '/var/lib/netplug/mtu';
export const FALLBACK_MTU = 1500;
const MIN_MTU = 68;
const MAX_MTU = 65535;

/** The MTU for `"mtu": 0`. Never fails: each source that is missing or odd gives way to the next. */
export function autoMtu(mtuFile: string): number {
  return mtuFromFile(mtuFile) ?? defaultRouteMtu() ?? FALLBACK_MTU;
}

/** The integer in `path`, if the file exists and holds a usable MTU. */
export function mtuFromFile(path: string): number | undefined {
  return usable(readText(path)?.trim());
}

/** The MTU of the host's default-route interface: IPv4's default route, else IPv6's. */
export function defaultRouteMtu(): number | undefined {
  const name = defaultRouteInterface4(readText('/proc/net/route') ?? '') ?? defaultRouteInterface6(readText('/proc/net/ipv6_route') ?? '');
  // An interface name from the kernel's own table, but never a path.
  return name && !name.includes('/') && name !== '.' && name !== '..' ? usable(readText(`/sys/class/net/${name}/mtu`)?.trim()) : undefined;
}

const RTF_UP = 0x1;
const RTF_REJECT = 0x200;

/**
 * `/proc/net/route`: a header, then `Iface Destination Gateway Flags RefCnt Use Metric Mask ...`
 * in hex. The default route has destination and mask 0; the lowest metric wins, as in the kernel.
 */
export function defaultRouteInterface4(table: string): string | undefined {
  return lowestMetric(
    table
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter(([, destination, , flags, , , , mask]) => destination === '00000000' && mask === '00000000' && isUp(flags))
      .map(([name, , , , , , metric]) => ({ name, metric })),
  );
}

/**
 * `/proc/net/ipv6_route`: `dest prefixlen src srcprefixlen nexthop metric refcnt use flags dev`,
 * all hex. The default route is ::/0; the kernel's unreachable placeholder (a reject route on lo)
 * is not one.
 */
export function defaultRouteInterface6(table: string): string | undefined {
  return lowestMetric(
    table
      .split('\n')
      .map((line) => line.trim().split(/\s+/))
      .filter(([destination, prefix, , , , , , , flags]) => destination === '0'.repeat(32) && prefix === '00' && isUp(flags))
      .map(([, , , , , metric, , , , name]) => ({ name, metric })),
  );
}

function isUp(flags: string | undefined): boolean {
  const value = Number.parseInt(flags ?? '', 16);
  return Number.isInteger(value) && (value & RTF_UP) !== 0 && (value & RTF_REJECT) === 0;
}

function lowestMetric(routes: Array<{ name: string | undefined; metric: string | undefined }>): string | undefined {
  let best: { name: string; metric: number } | undefined;
  for (const { name, metric } of routes) {
    const value = Number.parseInt(metric ?? '', 16);
    if (!name || name === 'lo' || !Number.isFinite(value)) continue;
    if (!best || value < best.metric) best = { name, metric: value };
  }
  return best?.name;
}

function usable(text: string | undefined): number | undefined {
  if (!text || !/^\d{1,5}$/.test(text)) return undefined;
  const value = Number(text);
  return value >= MIN_MTU && value <= MAX_MTU ? value : undefined;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
