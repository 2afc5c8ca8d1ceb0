// GC and STATUS (CNI 1.1.0).
import { validAttachments } from '../ipam/gc.ts';
import { keys } from '../model/keys.ts';
import type { PluginContext } from './context.ts';
import { staleWorkloadEndpoints } from './workload-endpoint.ts';
import type { WorkloadEndpoint } from '../model/workload-endpoint.ts';

/**
 * Releases what attachments no longer listed in `cni.dev/valid-attachments` hold: their addresses
 * (by the address manager) and, with a datastore, this node's workload endpoints of this network.
 * Without the list it fails (error 7) before anything is released.
 */
export async function cmdGc(ctx: PluginContext): Promise<void> {
  const valid = new Set(validAttachments(ctx.netconf.json).map((a) => a.containerId));
  await ctx.ipam.gc();
  if (!ctx.usesDatastore) return;
  const store = await ctx.store();
  for (const { metadata } of await staleWorkloadEndpoints(store, ctx.node, ctx.conf.name, valid)) {
    // As it is now: a new sandbox of the pod may have taken the endpoint over since the listing.
    const entry = await store.get<WorkloadEndpoint>(keys.workloadEndpoint(metadata.namespace, metadata.name));
    if (!entry || entry.value.spec.node !== ctx.node || valid.has(entry.value.spec.containerID)) continue;
    if (await store.commit([{ key: entry.key, remove: true, revision: entry.revision }]))
      ctx.log.info('workload endpoint of an attachment no longer valid removed', { name: metadata.name });
  }
}

/** Succeeds when ADD could be served now; otherwise error 50 or 51. */
export async function cmdStatus(ctx: PluginContext): Promise<void> {
  await ctx.ipam.status();
  if (ctx.usesDatastore) await (await ctx.store()).listKeys(keys.pools);
}
