// GC and STATUS (CNI 1.1.0). Plain mode keeps no state of its own beyond the kernel, which the
// runtime cleans with the namespace; both are forwarded to the address manager.
import type { PluginContext } from './context.ts';

/** Releases the allocations of attachments that are not in `cni.dev/valid-attachments`. */
export async function cmdGc(ctx: PluginContext): Promise<void> {
  await ctx.ipam.gc();
}

/** Succeeds when ADD could be served now; otherwise error 50 or 51 from the address manager. */
export async function cmdStatus(ctx: PluginContext): Promise<void> {
  await ctx.ipam.status();
}
