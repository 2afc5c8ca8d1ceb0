// The cluster's pod CIDRs as kubeadm recorded them (ConfigMap kube-system/kubeadm-config,
// ClusterConfiguration networking.podSubnet, comma-separated, one per family): the default pools
// follow them, and listed pools must lie inside them.
import * as k8s from '@kubernetes/client-node';

import { formatPrefix, parsePrefix } from '../net/cidr.ts';
import type { Informer } from '../runtime/informers.ts';
import { KUBEADM_CONFIG } from './caches.ts';

/** The CIDRs of a ClusterConfiguration document; [] when it names none (or is not YAML). */
export function podSubnetsOf(clusterConfiguration: string | undefined): string[] {
  if (!clusterConfiguration) return [];
  let podSubnet: unknown;
  try {
    podSubnet = (k8s.loadYaml(clusterConfiguration) as { networking?: { podSubnet?: unknown } } | null)?.networking?.podSubnet;
  } catch {
    return [];
  }
  if (typeof podSubnet !== 'string') return [];
  return podSubnet
    .split(',')
    .map((item) => parsePrefix(item.trim()))
    .filter((prefix) => prefix !== undefined)
    .map(formatPrefix);
}

/** The pod CIDRs of kube-system/kubeadm-config as the cache holds it; [] without one. */
export function readPlatformCidrs(kubeadm: Pick<Informer<k8s.V1ConfigMap>, 'get'>): string[] {
  const configMap = kubeadm.get(KUBEADM_CONFIG.name, KUBEADM_CONFIG.namespace);
  return podSubnetsOf(configMap?.data?.['ClusterConfiguration']);
}
