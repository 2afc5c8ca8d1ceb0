// DEL: remove the interface and the workload endpoint, then release the addresses. Idempotent:
// a namespace, interface, endpoint or allocation that is already gone is success. Every step is
// attempted even if one fails.
import type { CniError } from '../cni/errors.ts';
import { teardownWorkload, type TeardownResult } from '../dataplane/index.ts';
import type { PluginContext } from './context.ts';
import { toCniError } from './errors.ts';
import { deleteWorkloadEndpoint } from './workload-endpoint.ts';

/** Stands for "the interface is still there": the address release is skipped, not failed. */
const INTERFACE_KEPT = Symbol('interface kept');

/**
 * `teardown`: the interface's removal, if already under way (early work); `hostEndGone`: whether
 * its host end has left the host.
 */
export async function cmdDel(ctx: PluginContext, teardown?: Promise<TeardownResult>, hostEndGone?: Promise<boolean>): Promise<void> {
  const { env, log } = ctx;
  const failures: CniError[] = [];
  const attempt = async (step: () => Promise<void>) => {
    try {
      await step();
    } catch (err) {
      if (err !== INTERFACE_KEPT) failures.push(toCniError(err, 'DEL'));
    }
  };
  // Deleting the veth is most of a DEL (the kernel waits for RCU grace periods), on a thread of its
  // own; the datastore work overlaps it. Addresses are released only once the interface is gone
  // (its host end leaves the host, routes and all, early in the deletion), so that no other
  // workload gets one while its old routes still exist; and not at all if it could not be
  // removed: the DEL fails, and the runtime's retry releases them.
  ctx.warmUp();
  let removed = false;
  const removal = attempt(async () => {
    const outcome = await (teardown ?? teardownWorkload(env.netns, env.ifname));
    removed = true;
    log.info('workload interface removed', { container: env.containerId, netns: env.netns, interface: env.ifname, outcome });
  });
  const interfaceGone = Promise.race([
    removal.then(() => (removed ? undefined : Promise.reject(INTERFACE_KEPT))),
    (hostEndGone ?? new Promise<boolean>(() => {})).then((gone) => (gone ? undefined : new Promise<void>(() => {}))),
  ]);
  interfaceGone.catch(() => undefined);
  const endpointGone = ctx.usesDatastore
    ? attempt(async () => {
        const { namespace, endpointName } = ctx.workload;
        const outcome = await deleteWorkloadEndpoint(await ctx.store(), namespace, endpointName, env.containerId);
        log.debug('workload endpoint', { name: `${namespace}/${endpointName}`, outcome });
      })
    : undefined;
  await attempt(() => ctx.ipam.del(interfaceGone));
  await Promise.all([removal, endpointGone]);
  const [first, ...rest] = failures;
  if (first) {
    if (rest.length) first.details = [first.details, ...rest.map((f) => f.message)].filter(Boolean).join('; ');
    throw first;
  }
}
