// `netplugctl datastore migrate export`: netplug's IPAM data and what belongs with it, read from
// the source datastore in one batch (on etcd one transaction, so one revision), into one
// document. Refused unless the source is locked, so that nothing changes while it is copied.
import { datastoreLocked } from '../model/cluster-information.ts';
import type { Entry, Read, Store } from '../store/store.ts';
import { refused } from '../ctl/usage.ts';
import { NETPLUG_VERSION } from '../version.ts';
import {
  EXPORT_API_VERSION,
  EXPORT_KIND,
  exportedEntries,
  SECTIONS,
  type DatastoreExport,
  type SectionName,
} from './datastore-document.ts';

export async function exportDatastore(store: Store, options: { allowUnlocked: boolean; now?: Date }): Promise<DatastoreExport> {
  const reads: Read[] = SECTIONS.map((s) => (s.name === 'clusterInformation' ? { get: s.prefix } : { list: s.prefix }));
  const results = await store.read(reads);
  const clusterInfo = results[0] as Entry<unknown> | undefined;
  const locked = datastoreLocked(clusterInfo);
  if (!locked && !options.allowUnlocked) {
    throw refused(
      `${store.description} is not locked: run netplugctl datastore migrate lock first, so that nothing changes while it is copied (or add --allow-unlocked)`,
    );
  }
  const sections = Object.fromEntries(
    SECTIONS.map((s, i) => {
      const found = results[i];
      const entries = s.name === 'clusterInformation' ? (found ? [found as Entry<unknown>] : []) : (found as Entry<unknown>[]);
      return [s.name, exportedEntries(entries)];
    }),
  ) as Record<SectionName, DatastoreExport['sections'][SectionName]>;
  return {
    apiVersion: EXPORT_API_VERSION,
    kind: EXPORT_KIND,
    metadata: {
      exportedAt: (options.now ?? new Date()).toISOString(),
      exportedBy: `netplugctl ${NETPLUG_VERSION}`,
      source: store.description,
      locked,
    },
    sections,
  };
}

/** `3 pools, 4 blocks, ...`: what an export or import holds, for people. */
export function describeSections(counts: Partial<Record<SectionName, number>>): string {
  return SECTIONS.filter((s) => counts[s.name] !== undefined)
    .map((s) => `${counts[s.name]} ${s.what}`)
    .join(', ');
}
