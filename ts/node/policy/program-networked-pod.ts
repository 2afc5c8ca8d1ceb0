// The policy subsystem's part in an ADD the agent serves (the plugin's `workloadNetworked`
// service, ts/plugin/services.ts): once the pod's interface and addresses are in place, and before
// the plugin's policy wait and its answer, the pod's endpoint (the host interface and addresses
// the ADD made, the labels of the pod as the watch holds it, or as the API gives it when the
// watch has not heard of it yet) is given to the compiler and written, so that the pod's first
// packet meets its policy and the wait finds the status file at once. Before the first pass has
// put the table in the kernel it returns at once: the pod's interface is not dispatched yet, so it
// carries nothing until that pass programs it (and writes its status file).
import type * as k8s from '@kubernetes/client-node';

import type { Logger } from '../../log/logger.ts';
import type { NetworkedWorkload } from '../../plugin/services.ts';
import type { KubePod } from '../../policy/endpoints.ts';
import { describeError } from '../../runtime/errors.ts';
import type { Informer } from '../../runtime/informers.ts';
import type { EngineFeed } from './feed-engine.ts';
import type { PolicyProgrammer } from './program-policy.ts';

/** Resolves once the pod's policy is in the kernel (or at once, before the first pass). */
export type ProgramNetworkedPod = (workload: NetworkedWorkload) => Promise<void>;

interface ProgramNetworkedPodOptions {
  feed: EngineFeed;
  programmer: PolicyProgrammer;
  pods: Informer<k8s.KubernetesObject>;
  /** Reads a pod from the API (when the watch does not hold it yet). */
  readPod(namespace: string, name: string): Promise<KubePod>;
  log: Logger;
}

export function programNetworkedPod(options: ProgramNetworkedPodOptions): ProgramNetworkedPod {
  const { feed, programmer, pods, readPod, log } = options;
  return async (workload) => {
    const key = `${workload.namespace}/${workload.pod}`;
    programmer.sawPod(key);
    let pod: KubePod | undefined;
    if (!pods.get(workload.pod, workload.namespace)) {
      try {
        pod = await readPod(workload.namespace, workload.pod);
      } catch (err) {
        // Its interface stays undispatched (it carries nothing) until the watch holds the pod.
        log.warning(`pod ${key}: cannot read it (${describeError(err)}); it is programmed once the watch has it`);
      }
    }
    feed.learn(key, {
      ...(workload.podUid ? { uid: workload.podUid } : {}),
      hostInterface: workload.hostInterface,
      containerInterface: workload.containerInterface,
      addresses: [...workload.addresses],
      mac: workload.mac,
      ...(pod ? { pod } : {}),
    });
    if (!programmer.inKernel()) return;
    await programmer.exclusive(() => programmer.pass());
  };
}
