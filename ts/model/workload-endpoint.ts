// Workload endpoints: what the policy agent reads to program policy for a workload's interface,
// one per interface of a workload, named as the reference names them. Written and removed by the
// plugin (ts/plugin/workload-endpoint.ts).
import { API_VERSION } from './entry.ts';

export interface WorkloadEndpointSpec {
  orchestrator: string;
  workload: string;
  node: string;
  containerID: string;
  pod: string;
  endpoint: string;
  serviceAccountName?: string;
  interfaceName: string;
  mac: string;
  ipNetworks: string[];
  profiles: string[];
  ports?: Array<{ name: string; protocol: string; port: number }>;
  /** Floating IPs: traffic to `externalIP` is forwarded to `internalIP`. */
  ipNATs?: Array<{ internalIP: string; externalIP: string }>;
}

export interface WorkloadEndpoint {
  kind: 'WorkloadEndpoint';
  apiVersion: string;
  metadata: { name: string; namespace: string; labels: Record<string, string>; creationTimestamp: string; generateName?: string };
  spec: WorkloadEndpointSpec;
}

/** `<node>-<orchestrator>-<workload>-<endpoint>`, each part's dashes doubled (the reference's names). */
export function workloadEndpointName(node: string, orchestrator: string, workload: string, endpoint: string): string {
  return [node, orchestrator, workload, endpoint].map((part) => part.replaceAll('-', '--')).join('-');
}

export function workloadEndpoint(
  namespace: string,
  spec: WorkloadEndpointSpec,
  labels: Record<string, string> = {},
  generateName?: string,
): WorkloadEndpoint {
  return {
    kind: 'WorkloadEndpoint',
    apiVersion: API_VERSION,
    metadata: {
      name: workloadEndpointName(spec.node, spec.orchestrator, spec.orchestrator === 'k8s' ? spec.pod : spec.workload, spec.endpoint),
      namespace,
      labels: { ...labels, 'projectnet.org/namespace': namespace, 'projectnet.org/orchestrator': spec.orchestrator },
      creationTimestamp: new Date().toISOString(),
      ...(generateName ? { generateName } : {}),
    },
    spec,
  };
}

/** The network an endpoint belongs to: its label (netplug writes one), else its profile outside Kubernetes. */
export function networkOf(labels: Record<string, string>, spec: WorkloadEndpointSpec): string | undefined {
  return labels['projectnet.org/network'] ?? (spec.orchestrator === 'cni' ? spec.profiles[0] : undefined);
}
