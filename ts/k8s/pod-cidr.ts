// host-local with the node's pod CIDRs: `usePodCidr` and `usePodCidrIPv6`, in `ipam.subnet` or in
// a range's `subnet`, become the Kubernetes Node's IPv4 and IPv6 pod CIDRs in the netconf host-local
// receives. DEL needs no lookup: host-local releases by container, so any valid subnet will do.
import { CniError, ErrorCode } from '../cni/errors.ts';
import { parsePrefix } from '../net/cidr.ts';

const PLACEHOLDERS: Record<string, 4 | 6> = { usepodcidr: 4, usepodcidripv6: 6 };

type Ipam = Record<string, unknown> & { subnet?: unknown; ranges?: unknown };

/** Whether the netconf's host-local section names the node's pod CIDRs anywhere. */
export function usesPodCidr(json: Record<string, unknown>): boolean {
  return subnets(json).some((s) => typeof s === 'string' && s.toLowerCase() in PLACEHOLDERS);
}

/**
 * The netconf with each placeholder replaced by the node's pod CIDR of its family, read through
 * `podCidrs` (called once, only if a placeholder is there).
 */
export async function withPodCidrs(
  json: Record<string, unknown>,
  node: string,
  podCidrs: () => Promise<string[]>,
): Promise<Record<string, unknown>> {
  const cidrs = await podCidrs();
  const byFamily = new Map<4 | 6, string>();
  for (const cidr of cidrs) {
    const family = parsePrefix(cidr)?.family;
    if (!family) continue;
    if (byFamily.has(family)) {
      throw new CniError(
        ErrorCode.InvalidConfig,
        `node ${node} has two IPv${family} pod CIDRs (${cidrs.join(', ')}); usePodCidr needs at most one per family`,
      );
    }
    byFamily.set(family, cidr);
  }
  return replace(json, (placeholder, family) => {
    const cidr = byFamily.get(family);
    if (!cidr) {
      throw new CniError(
        ErrorCode.InvalidConfig,
        `netconf uses ${placeholder}, but node ${node} has no IPv${family} pod CIDR (its spec.podCIDRs: ${cidrs.length ? cidrs.join(', ') : 'none'})`,
      );
    }
    return cidr;
  });
}

/** For DEL: placeholders become 0.0.0.0/0 and ::/0, which host-local accepts and does not need. */
export function withAnyCidrs(json: Record<string, unknown>): Record<string, unknown> {
  return replace(json, (_, family) => (family === 4 ? '0.0.0.0/0' : '::/0'));
}

function subnets(json: Record<string, unknown>): unknown[] {
  const ipam = json['ipam'] as Ipam | undefined;
  const ranges = Array.isArray(ipam?.ranges) ? (ipam.ranges as unknown[]).flat() : [];
  return [ipam?.subnet, ...ranges.map((range) => (range as { subnet?: unknown } | undefined)?.subnet)];
}

function replace(json: Record<string, unknown>, cidrFor: (placeholder: string, family: 4 | 6) => string): Record<string, unknown> {
  const swap = (value: unknown) => {
    const family = typeof value === 'string' ? PLACEHOLDERS[value.toLowerCase()] : undefined;
    return family ? cidrFor(value as string, family) : value;
  };
  const ipam = { ...(json['ipam'] as Ipam) };
  if (ipam.subnet !== undefined) ipam.subnet = swap(ipam.subnet);
  if (Array.isArray(ipam.ranges)) {
    ipam.ranges = (ipam.ranges as unknown[]).map((set) =>
      Array.isArray(set)
        ? set.map((range) =>
            range && typeof range === 'object' ? { ...range, subnet: swap((range as { subnet?: unknown }).subnet) } : range,
          )
        : set,
    );
  }
  return { ...json, ipam };
}
