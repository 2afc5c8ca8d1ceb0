// The pod and namespace annotations that steer a pod's addresses, and every rule the
// specification gives them: JSON arrays of strings; the pod's over the namespace's for pools;
// ipAddrs and ipAddrsNoIpam never together; at most one address per family; addresses over pools;
// ipAddrsNoIpam and floatingIPs only with their feature flags; specific addresses and pools only
// with netplug-ipam. Each violation is an error naming the annotation and its value; nothing has
// been allocated when it is raised.
import { CniError, ErrorCode } from '../cni/errors.ts';
import { ANNOTATIONS } from '../model/pod-annotations.ts';
import { parseIp, type Family } from '../net/cidr.ts';

/** What the annotations ask for; absent fields leave the netconf in charge. */
export interface AddressPlan {
  /** Pools per family, replacing the netconf's (and node selectors). */
  pools?: Partial<Record<Family, string[]>>;
  /** Exactly these addresses, through the address manager. */
  ips?: string[];
  /** Exactly these addresses, without the address manager. */
  ipsWithoutIpam?: string[];
  /** Addresses that reach the pod from outside (the workload endpoint's NATs). */
  floatingIps?: string[];
}

export interface AnnotationContext {
  pod: { namespace: string; name: string; annotations: Record<string, string> };
  namespaceAnnotations: Record<string, string>;
  ipamType: string;
  features: { ip_addrs_no_ipam: boolean; floating_ips: boolean };
}

export function addressPlan({ pod, namespaceAnnotations, ipamType, features }: AnnotationContext): AddressPlan {
  const where = `pod ${pod.namespace}/${pod.name}`;
  const fail = (key: string, value: string, problem: string) =>
    new CniError(ErrorCode.InvalidConfig, `annotation "${key}" ${JSON.stringify(value)} on ${where}: ${problem}`);
  const own = (key: string) => pod.annotations[key];
  const plan: AddressPlan = {};
  const managed = ipamType === 'netplug-ipam';

  const ips = own(ANNOTATIONS.ipAddrs);
  const noIpam = own(ANNOTATIONS.ipAddrsNoIpam);
  if (ips !== undefined && noIpam !== undefined) {
    throw new CniError(
      ErrorCode.InvalidConfig,
      `annotations "${ANNOTATIONS.ipAddrs}" and "${ANNOTATIONS.ipAddrsNoIpam}" on ${where} cannot be used together`,
    );
  }
  if (ips !== undefined) {
    if (!managed) throw fail(ANNOTATIONS.ipAddrs, ips, `a specific address needs ipam.type "netplug-ipam", not "${ipamType}"`);
    plan.ips = addresses(ANNOTATIONS.ipAddrs, ips, fail);
  } else if (noIpam !== undefined) {
    if (!managed) throw fail(ANNOTATIONS.ipAddrsNoIpam, noIpam, `needs ipam.type "netplug-ipam", not "${ipamType}"`);
    if (!features.ip_addrs_no_ipam)
      throw fail(ANNOTATIONS.ipAddrsNoIpam, noIpam, 'needs netconf field "feature_control.ip_addrs_no_ipam" set to true');
    plan.ipsWithoutIpam = addresses(ANNOTATIONS.ipAddrsNoIpam, noIpam, fail);
  } else {
    // Pools: the pod's annotation, else its namespace's; an address annotation makes them moot.
    for (const [family, key] of [
      [4, ANNOTATIONS.ipv4pools],
      [6, ANNOTATIONS.ipv6pools],
    ] as const) {
      const podValue = own(key);
      const value = podValue !== undefined && podValue !== '' ? podValue : namespaceAnnotations[key];
      if (value === undefined || value === '') continue;
      const source = podValue !== undefined && podValue !== '' ? where : `namespace ${pod.namespace}`;
      const failHere = (k: string, v: string, problem: string) =>
        new CniError(ErrorCode.InvalidConfig, `annotation "${k}" ${JSON.stringify(v)} on ${source}: ${problem}`);
      if (!managed) throw failHere(key, value, `choosing pools needs ipam.type "netplug-ipam", not "${ipamType}"`);
      const pools = strings(key, value, failHere);
      if (pools.length === 0) throw failHere(key, value, 'names no pool');
      plan.pools ??= {};
      plan.pools[family] = pools;
    }
  }

  const floating = own(ANNOTATIONS.floatingIPs);
  if (floating !== undefined) {
    if (!features.floating_ips)
      throw fail(ANNOTATIONS.floatingIPs, floating, 'needs netconf field "feature_control.floating_ips" set to true');
    const list = strings(ANNOTATIONS.floatingIPs, floating, fail);
    const bad = list.find((ip) => !parseIp(ip));
    if (bad !== undefined) throw fail(ANNOTATIONS.floatingIPs, floating, `"${bad}" is not an IP address`);
    plan.floatingIps = list;
  }
  return plan;
}

type Fail = (key: string, value: string, problem: string) => CniError;

function strings(key: string, value: string, fail: Fail): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (err) {
    throw fail(key, value, `not JSON (${(err as Error).message}); write a JSON array of strings`);
  }
  if (!Array.isArray(parsed) || parsed.some((item) => typeof item !== 'string')) throw fail(key, value, 'must be a JSON array of strings');
  // As the netconf's ipv4_pools/ipv6_pools: an empty name names nothing.
  if (parsed.includes('')) throw fail(key, value, 'holds an empty string');
  return parsed as string[];
}

/** One IPv4 address, one IPv6 address, or one of each. */
function addresses(key: string, value: string, fail: Fail): string[] {
  const list = strings(key, value, fail);
  if (list.length === 0) throw fail(key, value, 'lists no address');
  const seen = new Set<Family>();
  for (const text of list) {
    const ip = parseIp(text);
    if (!ip) throw fail(key, value, `"${text}" is not an IP address`);
    if (seen.has(ip.family)) throw fail(key, value, `more than one IPv${ip.family} address; at most one IPv4 and one IPv6`);
    seen.add(ip.family);
  }
  return list;
}
