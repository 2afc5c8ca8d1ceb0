// Work a command starts before its netconf is validated, because it needs only the environment
// (or the datastore settings read straight from stdin): it overlaps validation and the loading of
// the rest of the program. On a pod's path this is most of what separates netplug from a plugin
// without a runtime to start: DEL's veth deletion (the kernel waits for RCU grace periods) and
// the datastore connection both run while the main thread does everything else. The kernel work
// starts first, before even the datastore code loads.
import type { CniEnvironment, Command } from '../cni/environment.ts';
import { interfacePresence, teardownWorkload, waitHostLinkGone, type Presence, type TeardownResult } from '../dataplane/index.ts';
import type { Prefetched } from '../ipam/netplug-ipam.ts';
import type { Store } from '../store/store.ts';
import type { PodReads } from './early-kube.ts';
import { hostInterfaceName } from './host-interface.ts';

export interface EarlyWork {
  /** DEL: the workload interface's removal, under way. */
  teardown?: Promise<TeardownResult>;
  /** DEL: whether the host end left the host (it does early in the removal). */
  hostEndGone?: Promise<boolean>;
  /** ADD: what is at the workload interface's name. */
  presence?: Promise<Presence>;
  /** The datastore, opening and connecting. */
  store?: Promise<Store>;
  /** ADD with netplug-ipam: the allocation's first reads, already asked of the datastore. */
  prefetched?: Prefetched;
  /** ADD of a pod with policy.type k8s: the API client and the pod and namespace reads, under way. */
  podReads?: PodReads;
}

const HOST_END_PATIENCE_MS = 2_000;

export async function startEarlyWork(
  command: Command,
  program: 'netplug' | 'netplug-ipam',
  env: CniEnvironment,
  stdin: Buffer,
): Promise<EarlyWork> {
  const work: EarlyWork = {};
  if (program === 'netplug' && command === 'DEL') {
    work.teardown = handled(teardownWorkload(env.netns, env.ifname));
    // Bounded: if the removal fails and the link stays, the process must not wait long to exit.
    work.hostEndGone = waitHostLinkGone(hostInterfaceName(env), HOST_END_PATIENCE_MS).catch(() => false);
  }
  if (program === 'netplug' && command === 'ADD') work.presence = handled(interfacePresence(env.netns, env.ifname, hostInterfaceName(env)));
  const { startDatastoreWork, rawJson } = await import('./early-datastore.ts');
  const json = rawJson(stdin);
  // Only a pod's ADD reads from the Kubernetes API: other commands do not load its code.
  const podReads =
    program === 'netplug' && command === 'ADD' && env.args.podName
      ? (await import('./early-kube.ts')).startKubeWork(command, env, json)
      : undefined;
  return { ...work, ...startDatastoreWork(command, program, env, json), ...(podReads ? { podReads } : {}) };
}

/** Waits for whatever early work is still running (a thread in the kernel must finish first). */
export async function settle(work: EarlyWork): Promise<void> {
  await Promise.allSettled([work.teardown, work.presence, work.hostEndGone]);
}

/** The same promise, with its failure marked as handled: whoever awaits it later still sees it. */
export function handled<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}
