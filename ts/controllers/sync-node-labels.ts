// The node controller's label sync (etcd datastore): each datastore Node resource's labels are
// kept equal to its Kubernetes Node's (pool node selectors match them). The node agent creates
// the resource when it registers its node; a node it has not registered gets none from here.
// With the Kubernetes datastore the Node resources are the cluster's own: nothing to sync.
import { keys } from '../model/keys.ts';
import { checkedNodeLabels } from '../model/checked-documents.ts';
import type { Store } from '../store/store.ts';
import type { Log } from '../runtime/log.ts';

export async function syncNodeLabels(
  store: Store,
  labelsOf: (node: string) => Record<string, string> | undefined,
  log: Log,
): Promise<void> {
  let conflicts = 0;
  for (const entry of await store.list<Record<string, unknown>>(keys.nodes)) {
    const name = entry.key.slice(keys.nodes.length);
    const wanted = labelsOf(name);
    if (!wanted || same(checkedNodeLabels(entry), wanted)) continue;
    const metadata = (entry.value['metadata'] ?? {}) as Record<string, unknown>;
    const value = { ...entry.value, metadata: { ...metadata, labels: wanted } };
    if (await store.commit([{ key: entry.key, update: value, revision: entry.revision }]))
      log.info(`set the labels of Node resource ${name} to the Kubernetes Node's: ${describe(wanted)}`);
    else conflicts++;
  }
  if (conflicts > 0) throw new Error(`${conflicts} Node resource(s) changed while their labels were synced`);
}

function same(a: Record<string, string>, b: Record<string, string>): boolean {
  const entries = Object.entries(a);
  return entries.length === Object.keys(b).length && entries.every(([key, value]) => b[key] === value);
}

const describe = (labels: Record<string, string>) =>
  Object.entries(labels)
    .map(([key, value]) => `${key}=${value}`)
    .join(',') || '(none)';
