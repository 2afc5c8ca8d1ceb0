// On the etcd datastore, netplug's Node resource is what pool node selectors match: the agent
// registers its node (as `netplugctl node create` does) with the Kubernetes Node's labels, and
// writes them again whenever they change there. (On the Kubernetes datastore the Node objects
// themselves are read: nothing to register.)
import { keys } from '../../model/keys.ts';
import type { NodeResource } from '../../model/node.ts';
import { checkedNodeLabels } from '../../model/checked-documents.ts';
import { API_VERSION, retryOnConflict, type Store } from '../../store/store.ts';

/** Creates or updates the node's resource so that its labels are `labels`; says what it did. */
export async function registerNode(
  store: Store,
  name: string,
  labels: Record<string, string>,
): Promise<'created' | 'updated' | 'unchanged'> {
  return retryOnConflict(`registering node "${name}"`, async () => {
    const entry = await store.get(keys.node(name));
    if (!entry) {
      const node: NodeResource = {
        kind: 'Node',
        apiVersion: API_VERSION,
        metadata: { name, creationTimestamp: new Date().toISOString(), labels },
        spec: {},
      };
      return (await store.commit([{ key: keys.node(name), create: node }])) ? 'created' : undefined;
    }
    if (sameLabels(checkedNodeLabels(entry), labels)) return 'unchanged';
    const value = entry.value as Partial<NodeResource>;
    const updated = { ...value, metadata: { ...value.metadata, name, labels } };
    return (await store.commit([{ key: entry.key, update: updated, revision: entry.revision }])) ? 'updated' : undefined;
  });
}

function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const keysOf = Object.keys(a);
  return keysOf.length === Object.keys(b).length && keysOf.every((k) => b[k] === a[k]);
}
