// Who the workload is: a Kubernetes pod when the runtime names one in CNI_ARGS (K8S_POD_NAMESPACE
// and K8S_POD_NAME, both), else a container outside any orchestrator. Its workload endpoint's name
// and namespace follow from that, as the reference's do.
import type { CniEnvironment } from '../cni/environment.ts';
import { keys } from '../model/keys.ts';
import { workloadEndpointName } from '../model/workload-endpoint.ts';

/** Where endpoints of workloads without an orchestrator namespace live. */
const CNI_ENDPOINT_NAMESPACE = 'default';

export interface Workload {
  orchestrator: 'k8s' | 'cni';
  /** The endpoint's namespace: the pod's, or "default" outside Kubernetes. */
  namespace: string;
  /** The pod's name (Kubernetes only). */
  pod?: string;
  /** The workload endpoint's name: `<node>-k8s-<pod>-<interface>` or `<node>-cni-<container>-<interface>`. */
  endpointName: string;
}

export function workloadOf(env: CniEnvironment, node: string): Workload {
  const { podNamespace, podName } = env.args;
  if (podNamespace && podName) {
    return {
      orchestrator: 'k8s',
      namespace: podNamespace,
      pod: podName,
      endpointName: workloadEndpointName(node, 'k8s', podName, env.ifname),
    };
  }
  return {
    orchestrator: 'cni',
    namespace: CNI_ENDPOINT_NAMESPACE,
    endpointName: workloadEndpointName(node, 'cni', env.containerId, env.ifname),
  };
}

/** The workload endpoint's key in the datastore. */
export const endpointKey = (workload: Workload) => keys.workloadEndpoint(workload.namespace, workload.endpointName);
