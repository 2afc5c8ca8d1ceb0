// The conflist template of ConfigMap netplug-system/cni-config (key config), from a defaulted,
// valid Installation, netplug-named. install-cni substitutes __KUBECONFIG_FILEPATH__
// on each node (and drops "mtu": 0, auto).
import { createHash } from 'node:crypto';

import { parsePrefix } from '../net/cidr.ts';
import { dirname } from 'node:path';

import { type NodeLayout, STANDARD_NODE_LAYOUT } from '../render/objects.ts';
import type { InstallationSpec } from './installation.ts';
import { quantityBytes } from './validate-installation.ts';

const MIB = 1024 * 1024;

function ipamSection(spec: InstallationSpec): Record<string, unknown> {
  const families = new Set((spec.calicoNetwork?.ipPools ?? []).map((pool) => parsePrefix(pool.cidr ?? '')?.family));
  const [v4, v6] = [families.has(4), families.has(6)];
  if (spec.cni?.ipam?.type === 'HostLocal') {
    if (v4 && v6) return { type: 'host-local', ranges: [[{ subnet: 'usePodCidr' }], [{ subnet: 'usePodCidrIPv6' }]] };
    return { type: 'host-local', subnet: v6 ? 'usePodCidrIPv6' : 'usePodCidr' };
  }
  // No pool listed (pools managed out of band): IPv4, as the plugin's default.
  return { type: 'netplug-ipam', assign_ipv4: String(v4 || !v6), assign_ipv6: String(v6) };
}

export function renderCniConfig(spec: InstallationSpec, node: NodeLayout = STANDARD_NODE_LAYOUT): string {
  const network = spec.calicoNetwork ?? {};
  const log = spec.logging?.cni ?? {};
  const netplug = {
    type: 'netplug',
    datastore_type: 'kubernetes',
    // The Node's name as install-cni knows it (the pod's spec.nodeName), not the host name: they
    // differ on many clouds, and the node agent's nodename file may not be written yet.
    nodename: '__KUBERNETES_NODE_NAME__',
    mtu: network.mtu ?? 0,
    // Where the node agent writes the detected MTU ("mtu": 0), when not the standard place.
    ...(node.stateDir === STANDARD_NODE_LAYOUT.stateDir ? {} : { mtu_file: `${node.stateDir}/mtu` }),
    log_level: log.logSeverity ?? 'Info',
    log_file_path: node.cniLogFile,
    log_file_max_size: Math.floor((quantityBytes(log.logFileMaxSize ?? '100Mi') ?? 100 * MIB) / MIB),
    log_file_max_age: log.logFileMaxAgeDays ?? 30,
    log_file_max_count: log.logFileMaxCount ?? 10,
    ipam: ipamSection(spec),
    container_settings: { allow_ip_forwarding: network.containerIPForwarding === 'Enabled' },
    policy: { type: 'k8s' },
    policy_setup_timeout_seconds: network.linuxPolicySetupTimeoutSeconds ?? 0,
    endpoint_status_dir: `${endpointStatusPathPrefix(spec, node)}/endpoint-status`,
    kubernetes: { kubeconfig: '__KUBECONFIG_FILEPATH__' },
  };
  const plugins: object[] = [netplug];
  if (network.hostPorts !== 'Disabled') plugins.push({ type: 'portmap', snat: true, capabilities: { portMappings: true } });
  return `${JSON.stringify({ name: 'k8s-pod-network', cniVersion: '1.0.0', plugins }, null, 2)}\n`;
}

/**
 * Where netplug-node writes endpoint-status/: spec.policy.endpointStatusPathPrefix, else the
 * directory of its socket (/var/run/netplug on a standard node), which it mounts already.
 */
export function endpointStatusPathPrefix(spec: InstallationSpec, node: NodeLayout): string {
  return spec.policy?.endpointStatusPathPrefix ?? dirname(node.agentSocket);
}

/** The hash on the node pod template: any change of the ConfigMap's data changes it, and so rolls the DaemonSet. */
export function configHash(data: Record<string, string>): string {
  const sorted = Object.fromEntries(Object.entries(data).sort(([a], [b]) => (a < b ? -1 : 1)));
  return createHash('sha256').update(JSON.stringify(sorted)).digest('hex');
}
