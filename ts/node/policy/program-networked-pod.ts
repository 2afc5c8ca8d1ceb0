// The policy subsystem's part in an ADD the agent serves (the plugin's `workloadPlanned` and
// `workloadNetworked` services, ts/plugin/services.ts), on the Kubernetes datastore.
//
// Planned: once the ADD's address manager has planned the pod's addresses, while it commits them
// and the interface is set up, the pod's endpoint (the host interface the plugin names, the planned
// addresses, the labels of the pod as the watch holds it) is given to the compiler and written in
// the background, with the pod's status file after it: the ADD's datastore commit takes longer than
// this, so the pod's policy costs the ADD next to nothing. A failed ADD withdraws what it gave: the
// addresses it planned may go to another pod, and must not stand for this one in the peers' sets.
//
// Networked: once the pod's interface and addresses are in place, and before the plugin's policy
// wait and its answer, the endpoint as the ADD made it (the pod as the API gives it when the watch
// has not heard of it yet) is given again, and a pass run in line after the planned one: the ADD
// answers only once the kernel holds the pod's policy (usually the planned pass's write, which this
// pass finds unchanged), so that the pod's first packet meets it and the wait finds the status file
// at once. Before the first pass has put the table in the kernel both return at once: the pod's
// interface is not dispatched yet, so it carries nothing until that pass programs it (and writes
// its status file).
import type * as k8s from '@kubernetes/client-node';

import type { Logger } from '../../log/logger.ts';
import type { NetworkedWorkload } from '../../plugin/services.ts';
import type { KubePod } from '../../policy/endpoints.ts';
import { span } from '../../runtime/call-spans.ts';
import { describeError } from '../../runtime/errors.ts';
import type { Informer } from '../../runtime/informers.ts';
import type { AddedPod, EngineFeed } from './feed-engine.ts';
import type { PolicyProgrammer } from './program-policy.ts';

/** Resolves once the pod's policy is in the kernel (or at once, before the first pass). */
export type ProgramNetworkedPod = (workload: NetworkedWorkload) => Promise<void>;
/** Starts programming a pod with its planned addresses; returns the withdrawal, for a failed ADD. */
export type ProgramPlannedPod = (workload: NetworkedWorkload) => () => void;

interface ProgramNetworkedPodOptions {
  feed: EngineFeed;
  programmer: PolicyProgrammer;
  pods: Informer<k8s.KubernetesObject>;
  /** Reads a pod from the API (when the watch does not hold it yet). */
  readPod(namespace: string, name: string): Promise<KubePod>;
  /** Has a pass run soon (the controller's), for what a withdrawal changed. */
  passSoon(): void;
  log: Logger;
}

/** What the ADD says of its pod, as the feed takes it. */
function addedPod(workload: NetworkedWorkload, pod: KubePod | undefined): AddedPod {
  return {
    ...(workload.podUid ? { uid: workload.podUid } : {}),
    hostInterface: workload.hostInterface,
    containerInterface: workload.containerInterface,
    addresses: [...workload.addresses],
    mac: workload.mac,
    ...(pod ? { pod } : {}),
  };
}

export function programNetworkedPod(options: ProgramNetworkedPodOptions): {
  workloadPlanned: ProgramPlannedPod;
  workloadNetworked: ProgramNetworkedPod;
} {
  const { feed, programmer, pods, readPod, passSoon, log } = options;
  const workloadPlanned: ProgramPlannedPod = (workload) => {
    const key = `${workload.namespace}/${workload.pod}`;
    programmer.sawPod(key);
    // The pod as the watch holds it, if it does: the API's read is left to the networked call.
    feed.learn(key, addedPod(workload, undefined));
    if (programmer.inKernel())
      // A failure is the networked call's to report: its own pass meets it again.
      programmer.exclusive(() => programmer.pass()).catch(() => undefined);
    return () => {
      feed.forget(key, workload.podUid);
      feed.mark('Pod', key);
      passSoon();
    };
  };
  const workloadNetworked: ProgramNetworkedPod = async (workload) => {
    const key = `${workload.namespace}/${workload.pod}`;
    programmer.sawPod(key);
    let pod: KubePod | undefined;
    if (!pods.get(workload.pod, workload.namespace)) {
      try {
        pod = await span('policy: pod read from the API', () => readPod(workload.namespace, workload.pod));
      } catch (err) {
        // Its interface stays undispatched (it carries nothing) until the watch holds the pod.
        log.warning(`pod ${key}: cannot read it (${describeError(err)}); it is programmed once the watch has it`);
      }
    }
    feed.learn(key, addedPod(workload, pod));
    if (!programmer.inKernel()) return;
    await span('policy: pass, its wait in line included', () => programmer.exclusive(() => programmer.pass()));
  };
  return { workloadPlanned, workloadNetworked };
}
