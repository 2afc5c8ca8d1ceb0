// Work a command starts as soon as its netconf is validated, before the rest of the program loads:
// it overlaps the loading and the set-up of the command. On a pod's path this is most of what
// separates netplug from a plugin without a runtime to start: DEL's host routes and veth deletion
// (the kernel waits for RCU grace periods) and the datastore connection both run while the main thread does
// everything else. The kernel work starts first, before even the datastore code loads.
import type { CniEnvironment, Command } from '../cni/environment.ts';
import type { ParsedNetconf } from '../config/netconf.ts';
import { interfacePresence, removeHostRoutes, type Presence } from '../dataplane/index.ts';
import { teardownAttachment, type AttachmentTeardown } from '../dataplane/ownership.ts';
import type { Prefetched } from '../ipam/read-ahead.ts';
import type { Store } from '../store/store.ts';
import type { PodReads } from './early-kube.ts';
import { handled } from './handled.ts';
import type { PluginServices } from './services.ts';
import { hostInterfaceName } from './host-interface.ts';

export interface EarlyWork {
  /** DEL: the removal of the attachment's own interface, under way. */
  teardown?: Promise<AttachmentTeardown>;
  /** DEL: the attachment's host routes removed (before the interface's removal starts). */
  routesGone?: Promise<number>;
  /** ADD: what is at the workload interface's name. */
  presence?: Promise<Presence>;
  /** The datastore, opening and connecting. */
  store?: Promise<Store>;
  /** ADD with netplug-ipam: the allocation's first reads, already asked of the datastore. */
  prefetched?: Prefetched;
  /** ADD of a pod with policy.type k8s: the API client and the pod and namespace reads, under way. */
  podReads?: PodReads;
}

/** Starts what `command` can start now; `netconf` is validated, so nothing here acts on bad input. */
export async function startEarlyWork(
  command: Command,
  program: 'netplug' | 'netplug-ipam',
  env: CniEnvironment,
  netconf: ParsedNetconf,
  services?: PluginServices,
  /** ADD: startPresence(), begun before the netconf was validated. */
  presence?: Promise<Presence>,
): Promise<EarlyWork> {
  const work: EarlyWork = {};
  if (program === 'netplug' && command === 'DEL') {
    const hostIfname = hostInterfaceName(env);
    // The host routes first, on their own (at once), then the veth (the kernel's RCU grace periods,
    // milliseconds): the addresses may be released once the routes are gone. In that order, so the
    // deletion, which holds the kernel's routing lock throughout, does not delay the routes. Both
    // only if the veth is this attachment's: a DEL of a pod's old sandbox finds its current one's
    // veth under the same name.
    const routesGone = handled(removeHostRoutes(env.netns, env.ifname, hostIfname));
    const removeInterface = () => teardownAttachment(env.netns, env.ifname, hostIfname);
    work.routesGone = routesGone;
    work.teardown = handled(routesGone.then(removeInterface, removeInterface));
  }
  if (program === 'netplug' && command === 'ADD') work.presence = presence ?? startPresence(env);
  Object.assign(work, (await import('./early-datastore.ts')).startDatastoreWork(command, program, env, netconf, services));
  // Only a pod's ADD reads from the Kubernetes API: other commands do not load its code.
  if (program === 'netplug' && command === 'ADD' && env.args.podName) {
    const podReads = (await import('./early-kube.ts')).startKubeWork(env, netconf.conf, services);
    if (podReads) work.podReads = podReads;
  }
  return work;
}

/** What is at an ADD's interface name, looked up now; throws if the host interface's name cannot be made. */
export function startPresence(env: CniEnvironment): Promise<Presence> {
  return handled(interfacePresence(env.netns, env.ifname, hostInterfaceName(env)));
}

/** Waits for whatever early work is still running (a thread in the kernel must finish first). */
export async function settle(work: EarlyWork): Promise<void> {
  await Promise.allSettled([work.teardown, work.presence, work.routesGone]);
}
