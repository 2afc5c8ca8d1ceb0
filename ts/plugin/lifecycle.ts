// GC and STATUS (CNI 1.1.0).
import { validAttachments } from '../ipam/netplug-ipam.ts';
import type { PluginContext } from './context.ts';
import { keys } from '../ipam/model.ts';
import { staleWorkloadEndpoints } from './workload-endpoint.ts';

/**
 * Releases what attachments no longer listed in `cni.dev/valid-attachments` hold: their addresses
 * (by the address manager) and, with a datastore, this node's workload endpoints of this network.
 */
export async function cmdGc(ctx: PluginContext): Promise<void> {
  await ctx.ipam.gc();
  if (!ctx.usesDatastore) return;
  const valid = new Set(validAttachments(ctx.netconf.json).map((a) => a.containerId));
  const store = await ctx.store();
  for (const endpoint of await staleWorkloadEndpoints(store, ctx.node, ctx.conf.name, valid)) {
    const entry = await store.get(keys.workloadEndpoint(endpoint.metadata.namespace, endpoint.metadata.name));
    if (entry) await store.commit([{ key: entry.key, remove: true, revision: entry.revision }]);
    ctx.log.info('workload endpoint of an attachment no longer valid removed', { name: endpoint.metadata.name });
  }
}

/** Succeeds when ADD could be served now; otherwise error 50 or 51. */
export async function cmdStatus(ctx: PluginContext): Promise<void> {
  await ctx.ipam.status();
  if (ctx.usesDatastore) await (await ctx.store()).listKeys(keys.pools);
}
