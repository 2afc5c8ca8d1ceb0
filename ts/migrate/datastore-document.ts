// The file `netplugctl datastore migrate export` writes and `import` reads: one versioned document
// holding netplug's IPAM data and what belongs with it, section by section, each entry the
// datastore key and the stored document as they were. JSON or YAML (YAML is read either way).
import { dump, load } from 'js-yaml';
import * as z from 'zod/mini';

import { CLUSTER_INFO_KEY } from '../model/cluster-information.ts';
import { keys } from '../model/keys.ts';
import type { Entry } from '../store/store.ts';

export const EXPORT_API_VERSION = 'netplugctl.projectnet.org/v1';
export const EXPORT_KIND = 'DatastoreExport';

/**
 * What an export holds, in the order an import writes it: ClusterInformation first (locked, so that
 * nothing allocates from a half-written datastore), blocks before the handles and affinities that
 * point at them (an affinity whose block is missing would get a new, empty one), pools last (without
 * pools nothing can allocate even if someone unlocked early). Nodes are read, never written: in
 * the Kubernetes datastore they are the cluster's Node objects.
 */
export const SECTIONS = [
  { name: 'clusterInformation', prefix: CLUSTER_INFO_KEY, what: 'ClusterInformation' },
  { name: 'nodes', prefix: keys.nodes, what: 'nodes' },
  { name: 'blocks', prefix: '/netplug/ipam/v2/assignment/', what: 'blocks' },
  { name: 'handles', prefix: keys.handles, what: 'handles' },
  { name: 'blockAffinities', prefix: keys.allAffinities, what: 'block affinities' },
  { name: 'workloadEndpoints', prefix: keys.workloadEndpoints, what: 'workload endpoints' },
  { name: 'ipamPendingRequests', prefix: '/netplug/ipam/v2/pending/', what: 'pending requests' },
  { name: 'pools', prefix: keys.pools, what: 'pools' },
] as const;

export type SectionName = (typeof SECTIONS)[number]['name'];

/** A stored document as exported: its key and value (the revision means nothing elsewhere). */
export interface Exported {
  key: string;
  value: Record<string, unknown>;
}

export interface DatastoreExport {
  apiVersion: typeof EXPORT_API_VERSION;
  kind: typeof EXPORT_KIND;
  /** When, by which netplugctl, from where, and whether the source was locked meanwhile. */
  metadata: { exportedAt: string; exportedBy: string; source: string; locked: boolean };
  sections: Record<SectionName, Exported[]>;
}

const document = z.object({ key: z.string(), value: z.record(z.string(), z.unknown()) });

const schema = z.object({
  apiVersion: z.literal(EXPORT_API_VERSION),
  kind: z.literal(EXPORT_KIND),
  metadata: z.object({ exportedAt: z.string(), exportedBy: z.string(), source: z.string(), locked: z.boolean() }),
  sections: z.object(
    Object.fromEntries(SECTIONS.map((s) => [s.name, z.array(document)])) as Record<SectionName, z.ZodMiniArray<typeof document>>,
  ),
});

export function exportedEntries(entries: readonly Entry<unknown>[]): Exported[] {
  return entries.map(({ key, value }) => ({ key, value: value as Record<string, unknown> })).sort((a, b) => a.key.localeCompare(b.key));
}

export function formatExport(data: DatastoreExport, format: 'json' | 'yaml'): string {
  return format === 'json' ? `${JSON.stringify(data, null, 2)}\n` : dump(data, { lineWidth: -1 });
}

/** The export in `text` (JSON or YAML), or an Error saying in one line why it is not one. */
export function parseExport(text: string): DatastoreExport {
  let parsed: unknown;
  try {
    parsed = load(text);
  } catch (err) {
    throw new Error(`it is neither JSON nor YAML (${(err as Error).message.split('\n')[0]})`);
  }
  const kind = (parsed as { kind?: unknown } | null)?.kind;
  if (typeof parsed !== 'object' || parsed === null || kind !== EXPORT_KIND)
    throw new Error(`it is not a netplugctl datastore export (kind ${JSON.stringify(kind ?? null)}, expected "${EXPORT_KIND}")`);
  const result = schema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new Error(`it is not a usable datastore export: field "${issue?.path.join('.')}": ${issue?.message}`);
  }
  const data = result.data as DatastoreExport;
  for (const section of SECTIONS) {
    for (const [i, entry] of data.sections[section.name].entries()) {
      const exact = section.name === 'clusterInformation';
      if (exact ? entry.key !== section.prefix : !entry.key.startsWith(section.prefix) || entry.key === section.prefix)
        throw new Error(
          `field "sections.${section.name}.${i}.key": ${JSON.stringify(entry.key)} is not a key of ${section.what} (${section.prefix}...)`,
        );
    }
  }
  return data;
}
