// netplug-node's settings, from its environment (the DaemonSet's env; names as the reference's
// calico-node takes them), parsed by one schema (runtime/settings.ts): a bad value stops the agent
// with a line naming the variable and its value, every bad variable at once, before it writes
// anything.
import { hostname } from 'node:os';

import * as z from 'zod/mini';

import { isNodeName, NODE_NAME_RULE } from '../../config/nodename.ts';
import { parsePrefix } from '../../net/cidr.ts';
import { ENCAPSULATION_MODES, type EncapsulationMode } from '../../model/ip-pool.ts';
import { DEFAULT_FAILSAFE, parseFailsafePorts, type FailsafePort } from '../../policy/host-chains.ts';
import { LOG_LEVEL } from '../../runtime/log.ts';
import { flag, hostPort, Invalid, oneOf, parseEnv, SettingsError, setting, text } from '../../runtime/settings.ts';
import { ETCD_ENVIRONMENT, etcdFromEnvironment } from '../../store/etcd/environment.ts';
import type { DatastoreSettings } from '../../store/open.ts';
import { interfacePrefix } from '../../plugin/host-interface.ts';
import { parseAddress6Setting, parseAddressSetting, type Address6Setting, type AddressSetting } from './node-address.ts';

export interface NodeSettings {
  nodeName: string;
  datastoreType: 'etcdv3' | 'kubernetes';
  /** The etcd datastore's connection (ETCD_*); unused with the Kubernetes datastore. */
  etcd: DatastoreSettings;
  /** What to log at start about deprecated ETCD_* variables (etcd datastore only). */
  etcdDeprecation?: string;
  /** The kubeconfig for the Kubernetes API (tests, or outside a pod); in a pod, the service account. */
  kubeconfig: string | undefined;
  /** CLUSTER_TYPE, with `kdd` added on the Kubernetes datastore. */
  clusterType: string;
  varDir: string;
  /** NETPLUG_HEALTH_ADDR: /livez, /readyz and /metrics. */
  health: { host: string; port: number };
  /** NETPLUG_METRICS_ADDR: a second listener serving only /metrics (the health server serves it too). */
  metrics: { host: string; port: number } | undefined;
  /**
   * blockSize undefined: 26, or the pool's own prefix length when that is longer. Encapsulation:
   * VXLAN CrossSubnet unless NETPLUG_IPV4POOL_IPIP asks for IP-in-IP (a pool has one or the other).
   */
  defaultPool: {
    create: boolean;
    cidr: string | undefined;
    blockSize: string | undefined;
    vxlanMode: EncapsulationMode;
    ipipMode: EncapsulationMode;
  };
  /**
   * The default IPv6 pool, made only when NETPLUG_IPV6POOL_CIDR is set (a cluster that is not
   * dual-stack gets none). blockSize undefined: 122. VXLAN as NETPLUG_IPV6POOL_VXLAN says (Never by
   * default: IPv6 blocks routed directly between nodes of one IPv6 subnet); never IP-in-IP, which
   * has no IPv6 form.
   */
  defaultPool6: { cidr: string | undefined; blockSize: string | undefined; natOutgoing: boolean; vxlanMode: EncapsulationMode };
  /** USE_POD_CIDR: addresses come from each Node's spec.podCIDRs (host-local), not from pools. */
  usePodCidr: boolean;
  /** FAST_PATH (default true): serve the CNI protocol to the `netplug` shim on `agentSocket`. */
  fastPath: boolean;
  /** NETPLUG_AGENT_SOCKET: the CNI socket (default /var/run/netplug/cni.sock). */
  agentSocket: string;
  /**
   * NETPLUG_CNI_TIMINGS_FILE: where each served command's timings are appended, one JSON object a
   * line (ts/node/cni/call-timings.ts); none when unset. For diagnosis and the benchmark.
   */
  cniTimingsFile: string | undefined;
  /** IP: the node's underlay address, published for other nodes' routes (ts/node/addresses/). */
  nodeAddress: AddressSetting;
  /** IP6: the node's IPv6 underlay address (none by default), published and routed through likewise. */
  nodeAddress6: Address6Setting;
  /** NETPLUG_NETWORKING_BACKEND: `routes` (default) programs routes to other nodes' blocks; `none` leaves routing to others. */
  routes: boolean;
  /**
   * NETPLUG_ROUTE_REFRESH_INTERVAL (seconds, default 30): routes follow the datastore's changes as
   * they come; this often the kernel is programmed again without one, putting back what was
   * changed by hand.
   */
  routeRefreshMs: number;
  /**
   * NETPLUG_POLICY_ENFORCEMENT: the policy subsystem (ts/node/policy/) runs and the `policy` part
   * is in netplug's table. Off, the agent deletes the status files a run with it on wrote. The
   * manifests and the operator set it (true as shipped); unset it is false, so that a netplug-config
   * without the key (a release's from before, as a rollback puts back) never starts the fail-closed
   * table.
   */
  policyEnforcement: boolean;
  /**
   * NETPLUG_ENDPOINT_STATUS_PATH_PREFIX (the reference's endpointStatusPathPrefix, default
   * /var/run/netplug): the policy subsystem writes `<prefix>/endpoint-status/`, which the plugin's
   * endpoint_status_dir names on the host.
   */
  endpointStatusPathPrefix: string;
  /**
   * NETPLUG_FAILSAFE_INBOUND_HOST_PORTS and NETPLUG_FAILSAFE_OUTBOUND_HOST_PORTS (`tcp:22,udp:68`,
   * or `none`; defaults in ts/policy/host-chains.ts): what host endpoints' policies never close
   * (by destination port), so a wrong policy cannot cut a node off; inbound also has the port of
   * NETPLUG_METRICS_ADDR and of NETPLUG_HEALTH_ADDR when they listen beyond loopback.
   */
  failsafe: { inbound: FailsafePort[]; outbound: FailsafePort[] };
  /**
   * NETPLUG_FLOW_LOGS (default false): with enforcement, the flows policy decided are recorded
   * per NETPLUG_FLOW_LOGS_INTERVAL (seconds, default 15) and sent to the flow-log aggregator at
   * NETPLUG_FLOW_LOGS_AGGREGATOR with the token in NETPLUG_FLOW_LOGS_TOKEN_FILE
   * (ts/node/policy/record-flows.ts, send-flows.ts).
   */
  flowLogs: { intervalMs: number; aggregator: string; tokenFile: string | undefined } | undefined;
  /** FELIX_INTERFACEPREFIX's first entry (default cali): the host side of workloads' veths, as the plugin names them. */
  interfacePrefix: string;
  /**
   * POD_NAMESPACE: the namespace of DaemonSet netplug-node this agent runs in (the manifests and
   * the operator give it). Set, the agent deletes netplug's table when it stops because netplug is
   * being removed from the cluster (the DaemonSet gone or being deleted); unset, it never does.
   */
  podNamespace: string | undefined;
  logLevel: z.output<typeof schema>['LOG_LEVEL'];
}

const DEFAULT_VAR_DIR = '/var/lib/netplug';

/** 127.0.0.0/8, ::1 and localhost: a listener there is not reached through a host endpoint. */
const isLoopback = (host: string): boolean => host === 'localhost' || host === '::1' || host.startsWith('127.');

const failsafePorts = (fallback: string) =>
  setting((given) => {
    try {
      return parseFailsafePorts(given);
    } catch (err) {
      throw new Invalid(`must be a list of <tcp|udp>:<port> such as tcp:22,udp:68, or none: ${(err as Error).message}`);
    }
  }, fallback);
const DEFAULT_HEALTH_ADDR = '127.0.0.1:9099';

/** A whole or decimal number of seconds within a day, in milliseconds. */
const seconds = (fallback: string) =>
  setting((given) => {
    const parsed = Number(given);
    if (!/^\d+(\.\d+)?$/.test(given) || !(parsed >= 1 && parsed <= 86_400))
      throw new Invalid('must be a number of seconds from 1 to 86400');
    return parsed * 1000;
  }, fallback);

const schema = z.object({
  NODENAME: setting((given) => {
    if (!isNodeName(given)) throw new Invalid(NODE_NAME_RULE);
    return given;
  }),
  DATASTORE_TYPE: oneOf(['etcdv3', 'kubernetes'], { default: 'etcdv3' }),
  ...ETCD_ENVIRONMENT,
  KUBECONFIG: text(),
  CLUSTER_TYPE: setting((given) => given, 'k8s'),
  NETPLUG_VAR_DIR: setting((given) => given, DEFAULT_VAR_DIR),
  NETPLUG_HEALTH_ADDR: hostPort(DEFAULT_HEALTH_ADDR),
  NETPLUG_METRICS_ADDR: setting((given) => {
    const parsed = hostPort(':9091').safeParse(given);
    if (!parsed.success) throw new Invalid('must be host:port, such as 127.0.0.1:9091 or :9091');
    return parsed.data;
  }),
  NETPLUG_IPV4POOL_CIDR: setting((given) => {
    if (parsePrefix(given)?.family !== 4) throw new Invalid('is not an IPv4 CIDR such as 10.244.0.0/16');
    return given;
  }),
  NETPLUG_IPV4POOL_BLOCK_SIZE: text(),
  NETPLUG_IPV6POOL_CIDR: setting((given) => {
    if (parsePrefix(given)?.family !== 6) throw new Invalid('is not an IPv6 CIDR such as fd00:10:244::/56');
    return given;
  }),
  NETPLUG_IPV6POOL_BLOCK_SIZE: text(),
  NETPLUG_IPV6POOL_NAT_OUTGOING: flag(false),
  NETPLUG_IPV6POOL_VXLAN: oneOf(ENCAPSULATION_MODES, { default: 'Never' }),
  NETPLUG_IPV4POOL_VXLAN: oneOf(ENCAPSULATION_MODES),
  NETPLUG_IPV4POOL_IPIP: oneOf(ENCAPSULATION_MODES, { default: 'Never' }),
  NO_DEFAULT_POOLS: setting((given) => given.toLowerCase() === 'true', 'false'),
  USE_POD_CIDR: flag(false),
  FAST_PATH: flag(true),
  NETPLUG_AGENT_SOCKET: setting((given) => {
    if (!given.startsWith('/') || given.length > 100) throw new Invalid('must be an absolute path of at most 100 characters');
    return given;
  }, '/var/run/netplug/cni.sock'),
  NETPLUG_CNI_TIMINGS_FILE: text(),
  IP: setting((given) => {
    try {
      return parseAddressSetting(given);
    } catch {
      throw new Invalid('must be autodetect or an IPv4 address with its prefix length, such as 10.0.0.5/24');
    }
  }, 'autodetect'),
  IP6: setting((given) => {
    try {
      return parseAddress6Setting(given);
    } catch {
      throw new Invalid('must be none, autodetect or an IPv6 address with its prefix length, such as fd00:30::5/64');
    }
  }, 'none'),
  NETPLUG_NETWORKING_BACKEND: oneOf(['routes', 'none'], { default: 'routes' }),
  NETPLUG_ROUTE_REFRESH_INTERVAL: seconds('30'),
  NETPLUG_POLICY_ENFORCEMENT: flag(false),
  NETPLUG_ENDPOINT_STATUS_PATH_PREFIX: setting((given) => {
    if (!given.startsWith('/')) throw new Invalid('must be an absolute path, such as /var/run/netplug');
    return given;
  }, '/var/run/netplug'),
  FELIX_INTERFACEPREFIX: setting((given) => {
    try {
      return interfacePrefix({ FELIX_INTERFACEPREFIX: given });
    } catch (err) {
      throw new Invalid((err as Error).message.replace(/^FELIX_INTERFACEPREFIX's first entry "[^"]*" /, 'its first entry '));
    }
  }, 'cali'),
  NETPLUG_FAILSAFE_INBOUND_HOST_PORTS: failsafePorts(DEFAULT_FAILSAFE.inbound),
  NETPLUG_FAILSAFE_OUTBOUND_HOST_PORTS: failsafePorts(DEFAULT_FAILSAFE.outbound),
  NETPLUG_FLOW_LOGS: flag(false),
  NETPLUG_FLOW_LOGS_INTERVAL: seconds('15'),
  NETPLUG_FLOW_LOGS_AGGREGATOR: setting((given) => {
    if (!URL.canParse(given) || !/^https?:$/.test(new URL(given).protocol))
      throw new Invalid('must be an http(s) URL such as http://netplug-flows.kube-system.svc:9445');
    return given;
  }, 'http://netplug-flows.kube-system.svc:9445'),
  NETPLUG_FLOW_LOGS_TOKEN_FILE: text(),
  POD_NAMESPACE: text(),
  LOG_LEVEL,
});

/** The settings `env` gives; SettingsError names every variable that is wrong and its value. */
export function nodeSettings(env: NodeJS.ProcessEnv): NodeSettings {
  const given = parseEnv(schema, env);
  const nodeName = given.NODENAME ?? hostname().trim().toLowerCase();
  if (!isNodeName(nodeName))
    throw new SettingsError(`the host name (NODENAME is not set) ${NODE_NAME_RULE}, got "${nodeName.slice(0, 100)}"`);
  const type = given.DATASTORE_TYPE;
  const { etcd, deprecation } = etcdFromEnvironment(given);
  return {
    nodeName,
    datastoreType: type,
    etcd: { datastore_type: 'etcdv3', ...etcd },
    ...(type === 'etcdv3' && deprecation ? { etcdDeprecation: deprecation } : {}),
    kubeconfig: given.KUBECONFIG,
    clusterType: [given.CLUSTER_TYPE, ...(type === 'kubernetes' ? ['kdd'] : [])].join(','),
    varDir: given.NETPLUG_VAR_DIR,
    health: given.NETPLUG_HEALTH_ADDR,
    metrics: given.NETPLUG_METRICS_ADDR,
    defaultPool: {
      create: !given.NO_DEFAULT_POOLS,
      cidr: given.NETPLUG_IPV4POOL_CIDR,
      blockSize: given.NETPLUG_IPV4POOL_BLOCK_SIZE,
      // Direct routes between nodes of one subnet, VXLAN to the others: a default that works
      // wherever the nodes are, with no tunnel driver the kernel may lack (IP-in-IP).
      vxlanMode: given.NETPLUG_IPV4POOL_VXLAN ?? (given.NETPLUG_IPV4POOL_IPIP === 'Never' ? 'CrossSubnet' : 'Never'),
      ipipMode: given.NETPLUG_IPV4POOL_IPIP,
    },
    defaultPool6: {
      cidr: given.NETPLUG_IPV6POOL_CIDR,
      blockSize: given.NETPLUG_IPV6POOL_BLOCK_SIZE,
      natOutgoing: given.NETPLUG_IPV6POOL_NAT_OUTGOING,
      vxlanMode: given.NETPLUG_IPV6POOL_VXLAN,
    },
    usePodCidr: given.USE_POD_CIDR,
    fastPath: given.FAST_PATH,
    agentSocket: given.NETPLUG_AGENT_SOCKET,
    cniTimingsFile: given.NETPLUG_CNI_TIMINGS_FILE,
    nodeAddress: given.IP,
    nodeAddress6: given.IP6,
    routes: given.NETPLUG_NETWORKING_BACKEND === 'routes',
    routeRefreshMs: given.NETPLUG_ROUTE_REFRESH_INTERVAL,
    policyEnforcement: given.NETPLUG_POLICY_ENFORCEMENT,
    endpointStatusPathPrefix: given.NETPLUG_ENDPOINT_STATUS_PATH_PREFIX,
    interfacePrefix: given.FELIX_INTERFACEPREFIX,
    failsafe: {
      inbound: [
        ...given.NETPLUG_FAILSAFE_INBOUND_HOST_PORTS,
        ...[given.NETPLUG_HEALTH_ADDR, given.NETPLUG_METRICS_ADDR].flatMap((listener) =>
          listener && !isLoopback(listener.host) ? [{ protocol: 'tcp' as const, port: listener.port }] : [],
        ),
      ],
      outbound: given.NETPLUG_FAILSAFE_OUTBOUND_HOST_PORTS,
    },
    flowLogs: given.NETPLUG_FLOW_LOGS
      ? {
          intervalMs: given.NETPLUG_FLOW_LOGS_INTERVAL,
          aggregator: given.NETPLUG_FLOW_LOGS_AGGREGATOR,
          tokenFile: given.NETPLUG_FLOW_LOGS_TOKEN_FILE,
        }
      : undefined,
    podNamespace: given.POD_NAMESPACE,
    logLevel: given.LOG_LEVEL,
  };
}
