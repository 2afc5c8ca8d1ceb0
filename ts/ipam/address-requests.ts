// What an ADD asks netplug-ipam for: exact addresses (the pod's ipAddrs annotation, or CNI_ARGS
// IP), else one address per requested family from the pools the annotation, the netconf or the
// node's labels choose.
import type { Family } from '../net/cidr.ts';
import type { NetplugIpamConfig } from '../config/ipam.ts';
import type { AddressRequest } from './assignment.ts';
import { poolError } from './errors.ts';
import type { AddressOverrides } from './ipam.ts';
import { choosePools, type Pool } from './pools.ts';

export interface RequestFacts {
  overrides: AddressOverrides;
  /** CNI_ARGS IP. */
  argIp: string | undefined;
  families: readonly Family[];
  config: NetplugIpamConfig;
  pools: readonly Pool[];
  /** The node's labels, for pools' node selectors. */
  labels: Record<string, string>;
}

export function addressRequests({ overrides, argIp, families, config, pools, labels }: RequestFacts): AddressRequest[] {
  if (overrides.ips) return overrides.ips.map((ip) => ({ ip, pools }));
  if (argIp) return [{ ip: argIp, pools }];
  if (families.length === 0)
    throw poolError('netconf fields "ipam.assign_ipv4" and "ipam.assign_ipv6" are both "false": there is no address to assign');
  // Pools an annotation names win over the netconf's, which win over node selectors.
  const requested = (family: Family) => {
    const annotated = overrides.pools?.[family];
    if (annotated) return { names: annotated, field: `annotation "cni.projectnet.org/ipv${family}pools"` };
    return { names: family === 4 ? config.ipv4_pools : config.ipv6_pools, field: `netconf field "ipam.ipv${family}_pools"` };
  };
  return families.map((family) => {
    const { names, field } = requested(family);
    return { family, pools: choosePools(pools, family, names, labels, field) };
  });
}

/** The families netplug-ipam assigns: IPv4 unless `assign_ipv4` is "false", IPv6 if `assign_ipv6` is "true". */
export function requestedFamilies(config: { assign_ipv4?: unknown; assign_ipv6?: unknown }): Family[] {
  return [...(config.assign_ipv4 !== 'false' ? [4 as const] : []), ...(config.assign_ipv6 === 'true' ? [6 as const] : [])];
}
