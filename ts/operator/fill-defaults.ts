// The Installation's defaults (the specification's, with netplug's names and the contract's pool
// defaults; IPv4 pools default to VXLANCrossSubnet: netplug-node routes directly between nodes of
// one subnet and over VXLAN to nodes on others, with no tunnel driver the kernel may lack, where
// the reference's IPIP needs one; with HostLocal IPAM, which VXLAN cannot serve, None).
// Pure: what the cluster holds (kubeadm's pod subnet, existing pools) comes in `cluster`.
import { formatPrefix, parsePrefix } from '../net/cidr.ts';
import type { Encapsulation, InstallationPool, InstallationSpec } from './installation.ts';

const DEFAULT_POOL_CIDR = '192.168.0.0/16';
const DEFAULT_POOL_NAMES = { 4: 'default-ipv4-ippool', 6: 'default-ipv6-ippool' } as const;

export interface ClusterFacts {
  /** The cluster's pod CIDRs (kubeadm-config's networking.podSubnet), if known. */
  platformCidrs: string[];
  /** Whether any IP pool exists: then an Installation listing none means "pools are managed out of band". */
  poolsExist: boolean;
  /** Existing pools' names by canonical CIDR: a listed CIDR keeps the name its pool has. */
  poolNames: ReadonlyMap<string, string>;
}

/** `10.0.0.0/16` → `10.0.0.0-16`; IPv6 with `.` for `:` (the reference's cidrToName). */
function cidrToName(cidr: string): string {
  return cidr.replaceAll(':', '.').replace('/', '-');
}

export function fillDefaults(spec: InstallationSpec, cluster: ClusterFacts): InstallationSpec {
  const filled = structuredClone(spec);
  filled.cni ??= {};
  const cni = filled.cni;
  cni.type ??= 'Netplug';
  cni.ipam ??= {};
  cni.ipam.type ??= 'Netplug';
  cni.binDir ??= '/opt/cni/bin';
  cni.confDir ??= '/etc/cni/net.d';
  cni.fastPath ??= 'Enabled';
  filled.calicoNetwork ??= {};
  const network = filled.calicoNetwork;
  network.hostPorts ??= 'Enabled';
  network.linuxPolicySetupTimeoutSeconds ??= 0;
  if (network.ipPools === undefined) {
    if (cluster.poolsExist) network.ipPools = [];
    else {
      network.ipPools = cluster.platformCidrs.map((cidr) => ({ cidr }));
      if (network.ipPools.length === 0 && cni.ipam.type === 'Netplug') network.ipPools = [{ cidr: DEFAULT_POOL_CIDR }];
    }
  }
  network.ipPools = defaultPools(network.ipPools, cluster.poolNames, cni.ipam.type === 'HostLocal' ? 'None' : 'VXLANCrossSubnet');
  // endpointStatusPathPrefix stays unset: its default is the directory of the agent's socket
  // (the operator's node layout, render-system.ts), /var/run/netplug on a standard node.
  filled.policy ??= {};
  // On, as the manifests' policy_enforcement.
  filled.policy.enforcement ??= 'Enabled';
  filled.logging ??= {};
  filled.logging.cni ??= {};
  const log = filled.logging.cni;
  log.logSeverity ??= 'Info';
  log.logFileMaxSize ??= '100Mi';
  log.logFileMaxAgeDays ??= 30;
  log.logFileMaxCount ??= 10;
  return filled;
}

function defaultPools(pools: InstallationPool[], existing: ReadonlyMap<string, string>, encapsulation4: Encapsulation): InstallationPool[] {
  const families = pools.map((pool) => (pool.cidr ? parsePrefix(pool.cidr) : undefined));
  const count = (family: number) => families.filter((prefix) => prefix?.family === family).length;
  // One pool, or one of each family: the default names; else names from the CIDRs.
  const defaultNames = pools.length <= 2 && count(4) <= 1 && count(6) <= 1;
  return pools.map((pool, i) => {
    const prefix = families[i];
    if (!prefix) return { ...pool };
    const cidr = formatPrefix(prefix);
    const v4 = prefix.family === 4;
    return {
      ...pool,
      name: pool.name ?? existing.get(cidr) ?? (defaultNames ? DEFAULT_POOL_NAMES[prefix.family] : cidrToName(cidr)),
      encapsulation: pool.encapsulation ?? (v4 ? encapsulation4 : 'None'),
      natOutgoing: pool.natOutgoing ?? (v4 ? 'Enabled' : 'Disabled'),
      nodeSelector: pool.nodeSelector ?? 'all()',
      blockSize: pool.blockSize ?? Math.max(v4 ? 26 : 122, prefix.length),
      disableNewAllocations: pool.disableNewAllocations ?? false,
    };
  });
}
