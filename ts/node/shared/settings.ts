// netplug-node's settings, from its environment (the DaemonSet's env; names as the reference's
// calico-node takes them). Checked all at start: a bad value stops the agent with a message
// naming the variable, before it writes anything.
import { hostname } from 'node:os';

import { isNodeName, NODE_NAME_RULE } from '../config/nodename.ts';
import { parsePrefix } from '../net/cidr.ts';
import type { DatastoreSettings } from '../store/open.ts';
import { parseAddressSetting, type AddressSetting } from './routes/node-address.ts';

export interface NodeSettings {
  nodeName: string;
  datastoreType: 'etcdv3' | 'kubernetes';
  /** The etcd datastore's connection (ETCD_*); unused with the Kubernetes datastore. */
  etcd: DatastoreSettings;
  /** The kubeconfig for the Kubernetes API (tests, or outside a pod); in a pod, the service account. */
  kubeconfig: string | undefined;
  /** CLUSTER_TYPE, with `kdd` added on the Kubernetes datastore. */
  clusterType: string;
  varDir: string;
  health: { host: string; port: number };
  /** NETPLUG_METRICS_ADDR: a second listener serving only /metrics (the health server serves it too). */
  metrics: { host: string; port: number } | undefined;
  /** blockSize undefined: 26, or the pool's own prefix length when that is longer. */
  defaultPool: { create: boolean; cidr: string | undefined; blockSize: string | undefined };
  /** USE_POD_CIDR: addresses come from each Node's spec.podCIDRs (host-local), not from pools. */
  usePodCidr: boolean;
  /** FAST_PATH (default true): serve the CNI protocol to the `netplug` shim on `agentSocket`. */
  fastPath: boolean;
  /** NETPLUG_AGENT_SOCKET: the CNI socket (default /var/run/netplug/cni.sock). */
  agentSocket: string;
  /**
   * NETPLUG_CNI_TIMINGS_FILE: where each served command's timings are appended, one JSON object a
   * line (ts/node/call-timings.ts); none when unset. For diagnosis and the benchmark.
   */
  cniTimingsFile: string | undefined;
  /** IP: the node's underlay address, published for other nodes' routes (ts/node/routes/). */
  nodeAddress: AddressSetting;
  /** NETPLUG_NETWORKING_BACKEND: `routes` (default) programs routes to other nodes' blocks; `none` leaves routing to others. */
  routes: boolean;
  /**
   * NETPLUG_ROUTE_REFRESH_INTERVAL (seconds, default 30): routes follow the datastore's changes as
   * they come; this often a pass also runs without one, putting back what was changed by hand.
   */
  routeRefreshMs: number;
}

export class NodeSettingsError extends Error {
  override readonly name = 'NodeSettingsError';
}

export const DEFAULT_VAR_DIR = '/var/lib/netplug';
export const DEFAULT_HEALTH_ADDR = '127.0.0.1:9099';

export function nodeSettings(env: NodeJS.ProcessEnv): NodeSettings {
  const value = (name: string) => (env[name] ?? '').trim() || undefined;
  const nodeName = value('NODENAME') ?? hostname().trim().toLowerCase();
  if (!isNodeName(nodeName))
    throw new NodeSettingsError(
      `${value('NODENAME') ? 'NODENAME' : 'the host name (NODENAME is not set)'} ${NODE_NAME_RULE}, got "${nodeName.slice(0, 100)}"`,
    );
  const type = value('DATASTORE_TYPE') ?? 'etcdv3';
  if (type !== 'etcdv3' && type !== 'kubernetes') throw new NodeSettingsError(`DATASTORE_TYPE "${type}" must be etcdv3 or kubernetes`);
  const etcd: DatastoreSettings = { datastore_type: 'etcdv3' };
  for (const [field, name] of [
    ['etcd_endpoints', 'ETCD_ENDPOINTS'],
    ['etcd_discovery_srv', 'ETCD_DISCOVERY_SRV'],
    ['etcd_ca_cert_file', 'ETCD_CA_CERT_FILE'],
    ['etcd_cert_file', 'ETCD_CERT_FILE'],
    ['etcd_key_file', 'ETCD_KEY_FILE'],
  ] as const) {
    const given = value(name);
    if (given) etcd[field] = given;
  }
  const cidr = value('NETPLUG_IPV4POOL_CIDR');
  if (cidr !== undefined && parsePrefix(cidr)?.family !== 4)
    throw new NodeSettingsError(`NETPLUG_IPV4POOL_CIDR "${cidr.slice(0, 100)}" is not an IPv4 CIDR such as 10.244.0.0/16`);
  const usePodCidr = value('USE_POD_CIDR')?.toLowerCase() ?? 'false';
  if (usePodCidr !== 'true' && usePodCidr !== 'false')
    throw new NodeSettingsError(`USE_POD_CIDR "${value('USE_POD_CIDR')?.slice(0, 100)}" must be true or false`);
  let nodeAddress: AddressSetting;
  try {
    nodeAddress = parseAddressSetting(value('IP'));
  } catch (err) {
    throw new NodeSettingsError((err as Error).message);
  }
  const backend = value('NETPLUG_NETWORKING_BACKEND') ?? 'routes';
  if (backend !== 'routes' && backend !== 'none')
    throw new NodeSettingsError(`NETPLUG_NETWORKING_BACKEND "${backend.slice(0, 100)}" must be routes or none`);
  const fastPath = value('FAST_PATH')?.toLowerCase() ?? 'true';
  if (fastPath !== 'true' && fastPath !== 'false')
    throw new NodeSettingsError(`FAST_PATH "${value('FAST_PATH')?.slice(0, 100)}" must be true or false`);
  const agentSocket = value('NETPLUG_AGENT_SOCKET') ?? '/var/run/netplug/cni.sock';
  if (!agentSocket.startsWith('/') || agentSocket.length > 100)
    throw new NodeSettingsError(`NETPLUG_AGENT_SOCKET "${agentSocket.slice(0, 100)}" must be an absolute path of at most 100 characters`);
  return {
    nodeName,
    datastoreType: type,
    etcd,
    kubeconfig: value('KUBECONFIG'),
    clusterType: [value('CLUSTER_TYPE') ?? 'k8s', ...(type === 'kubernetes' ? ['kdd'] : [])].join(','),
    cniTimingsFile: value('NETPLUG_CNI_TIMINGS_FILE'),
    varDir: value('NETPLUG_VAR_DIR') ?? DEFAULT_VAR_DIR,
    health: hostPort(value('NETPLUG_HEALTH_ADDR') ?? DEFAULT_HEALTH_ADDR),
    metrics:
      value('NETPLUG_METRICS_ADDR') === undefined ? undefined : hostPort(value('NETPLUG_METRICS_ADDR') as string, 'NETPLUG_METRICS_ADDR'),
    defaultPool: {
      create: value('NO_DEFAULT_POOLS')?.toLowerCase() !== 'true',
      cidr,
      blockSize: value('NETPLUG_IPV4POOL_BLOCK_SIZE'),
    },
    usePodCidr: usePodCidr === 'true',
    fastPath: fastPath === 'true',
    agentSocket,
    nodeAddress,
    routes: backend === 'routes',
    routeRefreshMs: seconds(value('NETPLUG_ROUTE_REFRESH_INTERVAL') ?? '30', 'NETPLUG_ROUTE_REFRESH_INTERVAL') * 1000,
  };
}

/** A whole or decimal number of seconds within a day. */
function seconds(text: string, name: string): number {
  const parsed = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || !(parsed >= 1 && parsed <= 86_400))
    throw new NodeSettingsError(`${name} "${text.slice(0, 100)}" must be a number of seconds from 1 to 86400`);
  return parsed;
}

/** `127.0.0.1:9099`, `[::1]:9099` or `:9099` (every address). */
function hostPort(text: string, name = 'NETPLUG_HEALTH_ADDR'): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(text);
  const port = Number(match?.[3]);
  if (!match || port > 65535)
    throw new NodeSettingsError(`${name} "${text.slice(0, 100)}" must be host:port, such as 127.0.0.1:9099 or :9091`);
  return { host: match[1] ?? (match[2] || '0.0.0.0'), port };
}
