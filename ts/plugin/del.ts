// DEL: remove the interface and the workload endpoint, then release the addresses. Idempotent:
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

/** Stands for "the interface is still there": the address release is skipped, not failed. */
const INTERFACE_KEPT = Symbol('interface kept');

/**
 * `teardown`: the interface's removal, if already under way (early work); `hostEndGone`: whether
 * its host end has left the host.
 */
export async function cmdDel(ctx: PluginContext, teardown?: Promise<AttachmentTeardown>, hostEndGone?: Promise<boolean>): Promise<void> {
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
  // own; the datastore work overlaps it. Addresses are released only once the interface is gone
  // (its host end leaves the host, routes and all, early in the deletion), so that no other
  // workload gets one while its old routes still exist; and not at all if it could not be
  // removed: the DEL fails, and the runtime's retry releases them.
  ctx.warmUp();
  let settled = false;
  const removal = attempt(0, async () => {
    const outcome = await (teardown ?? teardownAttachment(env.netns, env.ifname, hostInterfaceName(env)));
    settled = true;
    const where = { container: env.containerId, netns: env.netns, interface: env.ifname };
    if (outcome === 'foreign') log.warning("interface left alone: it is not this attachment's (not the peer of its host veth)", where);
    else log.info('workload interface removed', { ...where, outcome });
  });
  const interfaceGone = Promise.race([
    removal.then(() => (settled ? undefined : Promise.reject(INTERFACE_KEPT))),
    (hostEndGone ?? new Promise<boolean>(() => {})).then((gone) => (gone ? undefined : new Promise<void>(() => {}))),
  ]);
  interfaceGone.catch(() => undefined);
  const endpointGone = ctx.usesDatastore
    ? attempt(2, async () => {
        const { namespace, endpointName } = ctx.workload;
        const outcome = await deleteWorkloadEndpoint(await ctx.store(), namespace, endpointName, env.containerId);
        log.debug('workload endpoint', { name: `${namespace}/${endpointName}`, outcome });
      })
    : undefined;
  await attempt(1, () => ctx.ipam.del(interfaceGone));
  await Promise.all([removal, endpointGone]);
  const [first, ...rest] = failures.flat();
  if (first) {
    if (rest.length) first.details = [first.details, ...rest.map((f) => f.message)].filter(Boolean).join('; ');
    throw first;
  }
}
