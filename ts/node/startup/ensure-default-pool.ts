// The default pool a fresh cluster gets from its first node agent, as the reference's calico-node
// creates it: `default-ipv4-ippool`, only when no pool exists at all (an administrator's pools, or
// one they deleted on purpose after creating others, are left alone) and NO_DEFAULT_POOLS is not
// true. Its CIDR: NETPLUG_IPV4POOL_CIDR, else the cluster's pod CIDR as kubeadm recorded it
// (ClusterConfiguration networking.podSubnet, its first IPv4 CIDR), else 192.168.0.0/16. Its
// encapsulation: NETPLUG_IPV4POOL_VXLAN / NETPLUG_IPV4POOL_IPIP, by default VXLAN CrossSubnet (direct
// routes between nodes of one subnet, VXLAN to nodes on others).
// A dual-stack cluster also gets `default-ipv6-ippool` from NETPLUG_IPV6POOL_CIDR (blocks of
// NETPLUG_IPV6POOL_BLOCK_SIZE, natOutgoing and VXLAN as NETPLUG_IPV6POOL_NAT_OUTGOING and
// NETPLUG_IPV6POOL_VXLAN say) when no IPv6 pool exists; without the variable, none.
import * as k8s from '@kubernetes/client-node';

import { keys } from '../../model/keys.ts';
import { PoolOptionError, poolResource } from '../../model/pool-resource.ts';
import { formatPrefix, parsePrefix } from '../../net/cidr.ts';
import type { Logger } from '../../log/logger.ts';
import { SettingsError } from '../../runtime/settings.ts';
import { poolsOf } from '../../ipam/pools.ts';
import type { Entry, Store } from '../../store/store.ts';
import type { NodeSettings } from '../shared/settings.ts';

const DEFAULT_POOL = 'default-ipv4-ippool';
const DEFAULT_POOL6 = 'default-ipv6-ippool';
const FALLBACK_POOL_CIDR = '192.168.0.0/16';

/** The pool document, or a SettingsError naming the variable at fault. */
function defaultPool(cidr: string, options: NodeSettings['defaultPool'], now = new Date()) {
  const { blockSize, vxlanMode, ipipMode } = options;
  try {
    return poolResource(
      DEFAULT_POOL,
      {
        cidr,
        ...(blockSize === undefined ? {} : { 'block-size': blockSize }),
        'vxlan-mode': vxlanMode,
        'ipip-mode': ipipMode,
        'nat-outgoing': true,
      },
      now,
    );
  } catch (err) {
    if (!(err instanceof PoolOptionError)) throw err;
    const named = err.message
      .replaceAll('--block-size', 'NETPLUG_IPV4POOL_BLOCK_SIZE')
      .replaceAll('--cidr', 'its CIDR')
      .replaceAll('--vxlan-mode', 'NETPLUG_IPV4POOL_VXLAN')
      .replaceAll('--ipip-mode', 'NETPLUG_IPV4POOL_IPIP');
    throw new SettingsError(`the default pool: ${named}`);
  }
}

/** The default IPv6 pool's document, or a SettingsError naming the variable at fault. */
function defaultPool6(cidr: string, options: NodeSettings['defaultPool6'], now = new Date()) {
  try {
    return poolResource(
      DEFAULT_POOL6,
      {
        cidr,
        ...(options.blockSize === undefined ? {} : { 'block-size': options.blockSize }),
        'vxlan-mode': options.vxlanMode,
        'nat-outgoing': options.natOutgoing,
      },
      now,
    );
  } catch (err) {
    if (!(err instanceof PoolOptionError)) throw err;
    const named = err.message.replaceAll('--block-size', 'NETPLUG_IPV6POOL_BLOCK_SIZE').replaceAll('--cidr', 'NETPLUG_IPV6POOL_CIDR');
    throw new SettingsError(`the default IPv6 pool: ${named}`);
  }
}

/** Checks the default pools' settings at start, not when a pool is first missing; throws SettingsError. */
export function checkDefaultPool(settings: NodeSettings): void {
  defaultPool(settings.defaultPool.cidr ?? FALLBACK_POOL_CIDR, settings.defaultPool);
  if (settings.defaultPool6.cidr !== undefined) defaultPool6(settings.defaultPool6.cidr, settings.defaultPool6);
}

/** Creates the default IPv6 pool when NETPLUG_IPV6POOL_CIDR asks and the datastore has no IPv6 pool; says what it did, for the log. */
export async function ensureDefaultIpv6Pool(store: Store, settings: NodeSettings): Promise<string | undefined> {
  const { cidr } = settings.defaultPool6;
  if (cidr === undefined) return undefined;
  if (!settings.defaultPool.create) return 'NO_DEFAULT_POOLS is true: no default IPv6 pool';
  // A pool that cannot be read is not counted (its family unknown); the others are.
  const readable = (entry: Entry<unknown>) => {
    try {
      return poolsOf([entry]).length > 0;
    } catch {
      return false;
    }
  };
  const pools = poolsOf((await store.list(keys.pools)).filter(readable));
  if (pools.some((pool) => pool.prefix.family === 6)) return 'an IPv6 pool exists: no default IPv6 pool needed';
  const pool = defaultPool6(cidr, settings.defaultPool6);
  const created = await store.commit([{ key: keys.pool(DEFAULT_POOL6), create: pool }]);
  return created
    ? `created pool "${DEFAULT_POOL6}": ${pool.spec.cidr}, blocks of /${pool.spec.blockSize}, vxlanMode ${pool.spec.vxlanMode}${pool.spec.natOutgoing ? ', natOutgoing' : ''}`
    : `pool "${DEFAULT_POOL6}" was created meanwhile by another node`;
}

/** Creates the default pool if the datastore has none; says what it did, for the log. */
export async function ensureDefaultPool(store: Store, settings: NodeSettings, kube: k8s.KubeConfig, log: Logger): Promise<string> {
  if (!settings.defaultPool.create) return 'NO_DEFAULT_POOLS is true: no default pool';
  if ((await store.listKeys(keys.pools)).length > 0) return 'pools exist: no default pool needed';
  const cidr = settings.defaultPool.cidr ?? (await kubeadmPodSubnet(kube, log)) ?? FALLBACK_POOL_CIDR;
  const pool = defaultPool(cidr, settings.defaultPool);
  // Every node agent of a new cluster may get here at once: one create wins, the others find it made.
  const created = await store.commit([{ key: keys.pool(DEFAULT_POOL), create: pool }]);
  return created
    ? `created pool "${DEFAULT_POOL}": ${pool.spec.cidr}, blocks of /${pool.spec.blockSize}, vxlanMode ${pool.spec.vxlanMode}, ipipMode ${pool.spec.ipipMode}, natOutgoing`
    : `pool "${DEFAULT_POOL}" was created meanwhile by another node`;
}

/** The first IPv4 CIDR of kube-system/kubeadm-config's networking.podSubnet; undefined when there is none (not kubeadm, or not readable). */
async function kubeadmPodSubnet(kube: k8s.KubeConfig, log: Logger): Promise<string | undefined> {
  let configMap: k8s.V1ConfigMap;
  try {
    configMap = await kube.makeApiClient(k8s.CoreV1Api).readNamespacedConfigMap({ namespace: 'kube-system', name: 'kubeadm-config' });
  } catch (err) {
    const code = (err as { code?: number }).code;
    if (code === 404) return undefined;
    if (code === 403) {
      log.warning('cannot read ConfigMap kube-system/kubeadm-config (forbidden): the default pool does not follow the pod CIDR');
      return undefined;
    }
    throw err;
  }
  const text = configMap.data?.['ClusterConfiguration'];
  if (!text) return undefined;
  let podSubnet: unknown;
  try {
    podSubnet = (k8s.loadYaml(text) as { networking?: { podSubnet?: unknown } } | null)?.networking?.podSubnet;
  } catch {
    log.warning('ConfigMap kube-system/kubeadm-config: ClusterConfiguration is not YAML; the default pool does not follow the pod CIDR');
    return undefined;
  }
  if (typeof podSubnet !== 'string') return undefined;
  for (const item of podSubnet.split(',')) {
    const prefix = parsePrefix(item.trim());
    if (prefix?.family === 4) return formatPrefix(prefix);
  }
  return undefined;
}
