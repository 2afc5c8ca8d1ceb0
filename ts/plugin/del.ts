// DEL: remove the interface, then release the addresses. Idempotent: a namespace, interface or
// allocation that is already gone is success. Both steps are attempted even if one fails.
import { CniError } from '../cni/errors.ts';
import { teardownWorkload } from '../dataplane/index.ts';
import type { PluginContext } from './context.ts';
import { toCniError } from './dataplane-errors.ts';

export async function cmdDel(ctx: PluginContext): Promise<void> {
  const { env, log } = ctx;
  const failures: CniError[] = [];
  try {
    const outcome = await teardownWorkload(env.netns, env.ifname);
    log.info('workload interface removed', { container: env.containerId, netns: env.netns, interface: env.ifname, outcome });
  } catch (err) {
    failures.push(toCniError(err));
  }
  try {
    await ctx.ipam.del();
  } catch (err) {
    failures.push(toCniError(err));
  }
  const [first, ...rest] = failures;
  if (first) {
    if (rest.length) first.details = [first.details, ...rest.map((f) => f.message)].filter(Boolean).join('; ');
    throw first;
  }
}
