// Emptying a test cluster of workloads before it stops.
import { sleep } from './cluster-processes.ts';

/**
 * Deletes the workloads through the API so the kubelet tears their pods down as on a real node
 * (CNI DEL with the network namespace): controllers and pod-network pods first, then DaemonSets
 * and host-network pods (a CNI installed by a DaemonSet must outlive the pods that use it).
 * Bounded: a cluster that no longer answers is torn down regardless.
 */
export async function drainWorkloads(kubectlAsAdmin: (...args: string[]) => Promise<string>): Promise<void> {
  const kubectl = (...args: string[]) => kubectlAsAdmin('--request-timeout=10s', ...args);
  const remaining = async (hostNetwork: boolean | undefined) => {
    const pods = JSON.parse(await kubectl('get', 'pods', '--all-namespaces', '-o', 'json')).items as Array<{
      metadata: { namespace: string; name: string };
      spec: { hostNetwork?: boolean };
    }>;
    return pods.filter((pod) => hostNetwork === undefined || (pod.spec.hostNetwork ?? false) === hostNetwork);
  };
  const deletePods = async (hostNetwork: boolean | undefined) => {
    const deadline = Date.now() + 30_000;
    for (let pods = await remaining(hostNetwork); pods.length > 0 && Date.now() < deadline; pods = await remaining(hostNetwork)) {
      for (const namespace of new Set(pods.map((pod) => pod.metadata.namespace))) {
        const names = pods.filter((pod) => pod.metadata.namespace === namespace).map((pod) => pod.metadata.name);
        await kubectl('delete', 'pods', '-n', namespace, '--grace-period=1', '--wait=false', '--ignore-not-found', ...names);
      }
      await sleep(500);
    }
  };
  try {
    await kubectl('delete', 'deployments,replicasets,statefulsets,jobs,cronjobs', '--all', '--all-namespaces', '--wait=false');
    await deletePods(false);
    await kubectl('delete', 'daemonsets', '--all', '--all-namespaces', '--wait=false');
    await deletePods(undefined);
  } catch {
    // The API server or the kubelet is gone: removeClusterLeftovers takes the rest.
  }
}
