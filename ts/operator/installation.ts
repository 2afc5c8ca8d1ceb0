// The Installation resource (operator.projectnet.org/v1, deploy/operator-crds/installations.yaml)
// as the operator reads it, and the names it works with.
export const GROUP = 'operator.projectnet.org';
export const VERSION = 'v1';
export const API_VERSION = `${GROUP}/${VERSION}`;
/** Only this Installation is reconciled. */
export const INSTALLATION = 'default';
export const FINALIZER = 'projectnet.org/operator-cleanup';
export const FIELD_MANAGER = 'netplug-operator';
export const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'netplug-operator' };
export const SYSTEM_NAMESPACE = 'netplug-system';
export const CNI_CONFIG_MAP = 'cni-config';
export const CNI_CONFIG_KEY = 'config';

type Toggle = 'Enabled' | 'Disabled';
export type Encapsulation = 'IPIP' | 'IPIPCrossSubnet' | 'VXLAN' | 'VXLANCrossSubnet' | 'None';

export interface InstallationPool {
  name?: string;
  cidr?: string;
  blockSize?: number;
  encapsulation?: Encapsulation;
  natOutgoing?: Toggle;
  nodeSelector?: string;
  disableNewAllocations?: boolean;
}

export interface InstallationSpec {
  cni?: {
    type?: string;
    ipam?: { type?: string; plugin?: string };
    binDir?: string;
    confDir?: string;
    /** Enabled (default): netplug-node serves the plugin's calls through the shim; Disabled: one process per call. */
    fastPath?: Toggle;
  };
  calicoNetwork?: {
    ipPools?: InstallationPool[];
    mtu?: number;
    linuxPolicySetupTimeoutSeconds?: number;
    hostPorts?: Toggle;
    containerIPForwarding?: Toggle;
    /** Aliases of spec.cni.type / spec.cni.ipam.type. */
    cni?: { type?: string; ipam?: { type?: string } };
  };
  /** Network policy: netplug-node enforces it (Enabled, the default) or leaves the nodes without its rules. */
  policy?: {
    enforcement?: Toggle;
    /** Where netplug-node writes endpoint-status/ on each node (default: its socket's directory, /var/run/netplug). */
    endpointStatusPathPrefix?: string;
  };
  logging?: { cni?: { logSeverity?: string; logFileMaxSize?: string | number; logFileMaxAgeDays?: number; logFileMaxCount?: number } };
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

export interface Installation {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    resourceVersion?: string;
    generation?: number;
    finalizers?: string[];
    deletionTimestamp?: string | Date;
    [k: string]: unknown;
  };
  spec?: InstallationSpec;
  status?: InstallationStatus;
}

export interface InstallationStatus {
  /** The generation of the spec the status describes. */
  observedGeneration?: number;
  conditions?: Condition[];
  netplugVersion?: string;
  mtu?: number;
  computed?: InstallationSpec;
}

/** A component's report (deploy/operator-crds/netplugstatuses.yaml): `netplug` and `ippools`. */
export interface NetplugStatus {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; labels?: Record<string, string>; [k: string]: unknown };
  status?: { conditions?: Condition[] };
}

/** A setting the operator cannot use: `field` is its path in the Installation. */
export class InvalidConfiguration extends Error {
  override readonly name = 'InvalidConfiguration';
}
