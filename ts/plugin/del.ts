// DEL: remove the interface and the workload endpoint, then release the addresses (in one commit
// with the endpoint's removal when the agent knows the endpoint it wrote). Idempotent:
// a namespace, interface, endpoint or allocation that is already gone is success. Only what is
// this attachment's is removed: an interface at CNI_IFNAME that is not the workload end of this
// attachment's veth (another container's, `lo`, a link netplug did not make) is left alone, and
// the DEL goes on to release this container's addresses. Every step is attempted even if one fails.
import type { CniError } from '../cni/errors.ts';
import { teardownAttachment, type AttachmentTeardown } from '../dataplane/ownership.ts';
import type { PluginContext } from './context.ts';
import { toCniError } from './errors.ts';
import { hostInterfaceName } from './host-interface.ts';
import { deleteWorkloadEndpoint } from './workload-endpoint.ts';
import type { WorkloadEndpoint } from '../model/workload-endpoint.ts';
import { keys } from '../model/keys.ts';

/** Stands for "the interface is still there": the address release is skipped, not failed. */
const INTERFACE_KEPT = Symbol('interface kept');

export interface DelOptions {
  /** The interface's removal, if already under way (early work). */
  teardown?: Promise<AttachmentTeardown> | undefined;
  /** The attachment's host routes removed, before the removal started (early work). */
  routesGone?: Promise<number> | undefined;
  /** A resident host's taker of the removal's end (PluginServices.lingering), for a pod's DEL; else DEL waits for it. */
  lingering?: ((work: Promise<unknown>, what: string) => void) | undefined;
}

export async function cmdDel(ctx: PluginContext, { teardown, routesGone, lingering }: DelOptions = {}): Promise<void> {
  const { env, log } = ctx;
  // Failures are reported in the order of the steps, not of their arrival: the steps overlap, and
  // a DEL that fails twice (IPAM plugin missing, datastore unreachable) says the same thing each time.
  const failures: CniError[][] = [[], [], []];
  const attempt = async (order: 0 | 1 | 2, step: () => Promise<void>) => {
    try {
      await step();
    } catch (err) {
      if (err !== INTERFACE_KEPT) failures[order]?.push(toCniError(err, 'DEL'));
    }
  };
  // Deleting the veth is most of a DEL (the kernel waits for RCU grace periods), on a thread of its
  // own; the datastore work overlaps it. Addresses are released only once nothing on the host
  // leads to them: once the attachment's host routes are gone (removed on their own, at once,
  // before the deletion starts), or the interface is; so that no other workload gets one while its
  // old routes still exist. Not at all if neither could be removed: the DEL fails, and the
  // runtime's retry releases them.
  ctx.warmUp();
  const where = { container: env.containerId, netns: env.netns, interface: env.ifname };
  const removing = teardown ?? teardownAttachment(env.netns, env.ifname, hostInterfaceName(env));
  let settled = false;
  let handedOff = false;
  const removal = attempt(0, async () => {
    const outcome = await removing;
    settled = true;
    if (handedOff) return;
    if (outcome === 'foreign') log.warning("interface left alone: it is not this attachment's (not the peer of its host veth)", where);
    else log.info('workload interface removed', { ...where, outcome });
  });
  const interfaceGone = Promise.race([
    removal.then(() => (settled ? undefined : Promise.reject(INTERFACE_KEPT))),
    (routesGone ?? new Promise<number>(() => {})).then(
      () => undefined,
      () => new Promise<void>(() => {}),
    ),
  ]);
  interfaceGone.catch(() => undefined);
  const { namespace, endpointName } = ctx.workload;
  const endpointKey = keys.workloadEndpoint(namespace, endpointName);
  const written = ctx.usesDatastore ? ctx.known?.document<WorkloadEndpoint>(endpointKey) : undefined;
  const removeEndpoint = () =>
    attempt(2, async () => {
      const outcome = await deleteWorkloadEndpoint(await ctx.store(), namespace, endpointName, env.containerId, written);
      ctx.known?.drop(endpointKey);
      log.debug('workload endpoint', { name: `${namespace}/${endpointName}`, outcome });
    });
  // The endpoint this host wrote for this container (a resident agent knows it): removed in the
  // release's commit, one transaction for the DEL. Else, or if that commit did not take it, alone.
  let endpointRemoved = false;
  const alongside =
    written && written.value.spec.containerID === env.containerId && ctx.ipam.commitsCompanions
      ? {
          writes: [{ key: endpointKey, remove: true as const, revision: written.revision }],
          committed: () => {
            endpointRemoved = true;
            ctx.known?.drop(endpointKey);
            log.debug('workload endpoint', { name: `${namespace}/${endpointName}`, outcome: 'removed' });
          },
        }
      : undefined;
  const endpointGone = ctx.usesDatastore && !alongside ? removeEndpoint() : undefined;
  await attempt(1, () => ctx.ipam.del(interfaceGone, alongside));
  await (endpointGone ?? (alongside && !endpointRemoved ? removeEndpoint() : undefined));
  // Only a pod's DEL is answered before the kernel ends the veth's deletion: the kubelet removes
  // the sandbox, its namespace with it, right after. Any other caller (cnitool, podman, a script)
  // may look at the namespace next, and finds the interface gone.
  if (!settled && lingering && ctx.workload.orchestrator === 'k8s' && failures.flat().length === 0) {
    // A resident host answers now: the routes are gone and the addresses released; the kernel
    // finishes the deletion behind the answer, and the host logs it if it fails (the runtime then
    // destroys the namespace, and the veth with it).
    handedOff = true;
    log.info('workload interface being removed: its host routes are gone', where);
    lingering(removing, `removing interface "${env.ifname}" of container ${env.containerId} in ${env.netns}`);
  } else await removal;
  const [first, ...rest] = failures.flat();
  if (first) {
    if (rest.length) first.details = [first.details, ...rest.map((f) => f.message)].filter(Boolean).join('; ');
    throw first;
  }
}
