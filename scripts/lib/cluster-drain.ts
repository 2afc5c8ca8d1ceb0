// Emptying a test cluster of workloads before it stops.
/**
 * Deletes the workloads through the API so the kubelet tears their pods down as on a real node
 * (CNI DEL with the network namespace): the controllers, then every pod no DaemonSet owns (a pod
 * network's, and an operator's on the host network, which would otherwise make its controllers'
 * pods again), then the DaemonSets and their pods (a CNI installed by a DaemonSet must outlive the
 * pods that use it). Those last are deleted without a wait: nothing is left for the CNI to tear
 * down, and the cluster's removal stops whatever still runs (a wait there was 2 to 10 s of each
 * stop, 10 when the node agent went before a pod it had to tear down). Bounded: a cluster that no
 * longer answers is torn down regardless. Resolves to what each stage took, for the test's log.
 */
export async function drainWorkloads(kubectlAsAdmin: (...args: string[]) => Promise<string>): Promise<string> {
  const stages: string[] = [];
  let last = Date.now();
  const mark = (stage: string) => {
    stages.push(`${stage} ${((Date.now() - last) / 1000).toFixed(1)} s`);
    last = Date.now();
  };
  const kubectl = (...args: string[]) => kubectlAsAdmin('--request-timeout=10s', ...args);
  type Pod = { metadata: { namespace: string; name: string; ownerReferences?: Array<{ kind: string }> } };
  const ownedByDaemonSet = (pod: Pod) => (pod.metadata.ownerReferences ?? []).some((owner) => owner.kind === 'DaemonSet');
  const remaining = async (daemonSetPods: boolean | undefined) => {
    const pods = JSON.parse(await kubectl('get', 'pods', '--all-namespaces', '-o', 'json')).items as Pod[];
    return pods.filter((pod) => daemonSetPods === undefined || ownedByDaemonSet(pod) === daemonSetPods);
  };
  // kubectl delete waits until the kubelet has torn the pods down, which takes seconds; a pod whose
  // CNI a test removed never is, and waits out the timeout. Another pass catches pods a controller
  // being deleted still made.
  const deletePods = async (daemonSetPods: boolean | undefined, passes: number, timeout: string | 'no wait') => {
    for (
      let pass = 0, pods = await remaining(daemonSetPods);
      pass < passes && pods.length > 0;
      pass++, pods = await remaining(daemonSetPods)
    ) {
      const namespaces = [...new Set(pods.map((pod) => pod.metadata.namespace))];
      await Promise.all(
        namespaces.map((namespace) => {
          const names = pods.filter((pod) => pod.metadata.namespace === namespace).map((pod) => pod.metadata.name);
          return kubectlAsAdmin(
            'delete',
            'pods',
            '-n',
            namespace,
            '--grace-period=1',
            timeout === 'no wait' ? '--wait=false' : `--timeout=${timeout}`,
            '--ignore-not-found',
            ...names,
          );
        }),
      );
      mark(`pass ${pass + 1} (${pods.length} pods)`);
    }
  };
  try {
    await kubectl('delete', 'deployments,replicasets,statefulsets,jobs,cronjobs', '--all', '--all-namespaces', '--wait=false');
    mark('controllers deleted');
    await deletePods(false, 3, '15s');
    await kubectl('delete', 'daemonsets', '--all', '--all-namespaces', '--wait=false');
    mark('DaemonSets deleted');
    await deletePods(undefined, 1, 'no wait');
  } catch (err) {
    // The API server or the kubelet is gone: removeClusterLeftovers takes the rest.
    mark(`given up (${(err as Error).message.split('\n')[0]})`);
  }
  return stages.join('; ');
}
