// Emptying a test cluster of workloads before it stops.
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
  // kubectl delete waits until the kubelet has torn the pods down; another pass catches pods a
  // controller being deleted still made.
  const deletePods = async (hostNetwork: boolean | undefined) => {
    for (let pass = 0, pods = await remaining(hostNetwork); pass < 3 && pods.length > 0; pass++, pods = await remaining(hostNetwork)) {
      const namespaces = [...new Set(pods.map((pod) => pod.metadata.namespace))];
      await Promise.all(
        namespaces.map((namespace) => {
          const names = pods.filter((pod) => pod.metadata.namespace === namespace).map((pod) => pod.metadata.name);
          return kubectlAsAdmin('delete', 'pods', '-n', namespace, '--grace-period=1', '--timeout=30s', '--ignore-not-found', ...names);
        }),
      );
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
