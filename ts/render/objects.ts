// What the renderers produce: plain Kubernetes objects, serialised by whoever ships them (the
// manifest generator as YAML, the operator by server-side apply).
export type KubeObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
};

export type Datastore = 'kubernetes' | 'etcdv3';

export interface RenderOptions {
  datastore: Datastore;
  /** The namespace of every namespaced object: kube-system for the manifests. */
  namespace: string;
  /** The image every container runs (built by `npm run build:image`). */
  image: string;
  /** netplug-operator's variant of the objects (absent: the release manifests'). */
  operator?: OperatorVariant;
  /** The manifests' IPAM: netplug-ipam (default), or host-local with each node's pod CIDR (USE_POD_CIDR). */
  ipam?: 'netplug-ipam' | 'host-local';
  /**
   * netplug-node's NETPLUG_NETWORKING_BACKEND: `routes` (default) routes to other nodes' pods;
   * `none` is the policy-only install, where the cluster's route controller (or its network)
   * routes the pod CIDRs and netplug enforces policy only.
   */
  networking?: 'routes' | 'none';
}

/** netplug-node's port for Prometheus (NETPLUG_METRICS_ADDR), on every address of the node. */
export const NODE_METRICS_PORT = 9091;

/**
 * What netplug-operator renders differently from the manifests: its ConfigMap holds only the
 * conflist template, it owns the pools, and the CNI host paths come from the Installation.
 */
interface OperatorVariant {
  /** The ConfigMap and key of the conflist template. */
  configMap: string;
  configKey: string;
  /** Host paths of the CNI binaries and configuration (Installation spec.cni.binDir/confDir). */
  binDir: string;
  confDir: string;
  /** Host path of netplug's node state (nodename, MTU, the install record): /var/lib/netplug. */
  stateDir: string;
  /** Where netplug keeps its other files on a node (the CNI log, the agent's socket). */
  node: NodeLayout;
  /** Installation spec.cni.fastPath: netplug-node serves the plugin's calls (install-cni installs the shim). */
  fastPath: boolean;
  /** Installation spec.policy.enforcement: netplug-node enforces network policy. */
  policyEnforcement: boolean;
  /** Installation spec.policy.endpointStatusPathPrefix: where netplug-node writes endpoint-status/. */
  endpointStatusPathPrefix: string;
  /** HostLocal IPAM: netplug-node follows the node's pod CIDR. */
  usePodCidr: boolean;
  /**
   * FlowLogAggregator "default" with netplug-flows installed: netplug-node sends its flow records
   * to netplug-flows of its namespace every `intervalSeconds`. Absent: flow logs off.
   */
  flowLogs?: { intervalSeconds: number };
  /** A hash of the ConfigMap's data, on the pod template: a change of the template rolls the DaemonSet. */
  configHash: string;
}

/** The pod template annotation holding OperatorVariant.configHash. */
export const CONFIG_HASH_ANNOTATION = 'hash.operator.projectnet.org/cni-config';

export const NODE = 'netplug-node';
export const CONTROLLERS = 'netplug-kube-controllers';
export const CNI_PLUGIN = 'netplug-cni-plugin';
export const CONFIG_MAP = 'netplug-config';
export const ETCD_SECRET = 'netplug-etcd-secrets';
export const CONF_NAME = '10-netplug.conflist';
/** The reference's override of the API server address for host-network components (optional). */
export const SERVICE_ENDPOINT_CONFIG_MAP = 'kubernetes-services-endpoint';

export const labelsOf = (app: string) => ({ 'k8s-app': app });

/**
 * Where netplug keeps files on a node; the operator's env can move them (NETPLUG_NODE_STATE_DIR,
 * NETPLUG_CNI_LOG_FILE, NETPLUG_AGENT_SOCKET). A moved socket must also be in the container
 * runtime's environment (NETPLUG_AGENT_SOCKET), which the plugin inherits.
 */
export interface NodeLayout {
  stateDir: string;
  cniLogFile: string;
  /** netplug-node's CNI socket: the plugin shim's default, /var/run/netplug/cni.sock. */
  agentSocket: string;
}

export const STANDARD_NODE_LAYOUT: NodeLayout = {
  stateDir: '/var/lib/netplug',
  cniLogFile: '/var/log/netplug/cni/cni.log',
  agentSocket: '/var/run/netplug/cni.sock',
};

/** Where `npm run build:image` puts the image: a local name, never pulled from a registry. */
export const IMAGE_REPOSITORY = 'localhost/netplug';
