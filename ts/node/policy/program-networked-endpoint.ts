// The policy subsystem's part in an ADD the agent serves, on the etcd datastore: the ADD committed
// the pod's workload endpoint with its addresses (before it set up the interface), so the
// endpoint is read from the datastore now rather than awaited from the watch, given to the
// compiler and written, before the plugin's policy wait and its answer (as
// program-networked-pod.ts does from the pod on the Kubernetes datastore). Before the first pass
// has put the table in the kernel it returns at once: that pass programs the pod.
import type { Logger } from '../../log/logger.ts';
import { keys } from '../../model/keys.ts';
import { describeError } from '../../runtime/errors.ts';
import type { Store } from '../../store/store.ts';
import type { EngineFeed } from './feed-engine.ts';
import { addedEndpointKey, type FollowedDocuments } from './follow-datastore.ts';
import type { ProgramNetworkedPod } from './program-networked-pod.ts';
import type { PolicyProgrammer } from './program-policy.ts';

export function programNetworkedEndpoint(options: {
  nodeName: string;
  store: Pick<Store, 'get'>;
  documents: Pick<FollowedDocuments, 'put'>;
  feed: EngineFeed;
  programmer: PolicyProgrammer;
  log: Logger;
}): ProgramNetworkedPod {
  const { nodeName, store, documents, feed, programmer, log } = options;
  return async (workload) => {
    programmer.sawPod(`${workload.namespace}/${workload.pod}`);
    const key = addedEndpointKey(nodeName, workload.namespace, workload.pod, workload.containerInterface);
    try {
      const entry = await store.get(`${keys.workloadEndpoints}${key}`);
      if (entry && documents.put('WorkloadEndpoint', key, entry)) feed.mark('WorkloadEndpoint', key);
    } catch (err) {
      // Its interface stays undispatched (it carries nothing) until the watch brings its endpoint.
      log.warning(`workload endpoint ${key}: cannot read it (${describeError(err)}); it is programmed once the watch has it`);
    }
    if (!programmer.inKernel()) return;
    await programmer.exclusive(() => programmer.pass());
  };
}
