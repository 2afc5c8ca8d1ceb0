// netplugctl node create|list|delete: nodes and the labels pool node selectors match.
import { API_VERSION } from '../model/entry.ts';
import { keys } from '../model/keys.ts';
import type { NodeResource } from '../model/node.ts';
import type { Store } from '../store/store.ts';
import { table } from './table.ts';
import { refused, UsageError } from './usage.ts';

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const LABEL_KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

export function parseLabels(items: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const item of items) {
    const eq = item.indexOf('=');
    const [key, value] = eq < 0 ? [item, ''] : [item.slice(0, eq), item.slice(eq + 1)];
    if (eq < 0 || !LABEL_KEY.test(key))
      throw new UsageError(`--label "${item}" must be key=value with a label key such as zone or example.com/zone`);
    if (!LABEL_VALUE.test(value)) throw new UsageError(`--label "${item}": "${value}" is not a valid label value`);
    labels[key] = value;
  }
  return labels;
}

export async function createNode(store: Store, name: string, labelItems: readonly string[]): Promise<string> {
  if (!NAME.test(name)) throw new UsageError(`node name "${name}" must be lower-case letters, digits, '-' and '.'`);
  const labels = parseLabels(labelItems);
  const node: NodeResource = {
    kind: 'Node',
    apiVersion: API_VERSION,
    metadata: { name, creationTimestamp: new Date().toISOString(), labels },
    spec: {},
  };
  if (!(await store.commit([{ key: keys.node(name), create: node }]))) throw refused(`node "${name}" already exists`);
  return `node "${name}" created${labelItems.length ? ` with labels ${labelItems.join(', ')}` : ''}\n`;
}

export async function listNodes(store: Store, json: boolean): Promise<string> {
  const nodes = (await store.list<NodeResource>(keys.nodes)).map((e) => e.value.metadata);
  if (json) return `${JSON.stringify({ nodes: nodes.map(({ name, labels }) => ({ name, labels })) }, null, 2)}\n`;
  return table(
    ['NAME', 'LABELS'],
    nodes.map((n) => [
      n.name,
      Object.entries(n.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(','),
    ]),
  );
}

export async function deleteNode(store: Store, name: string): Promise<string> {
  const entry = await store.get(keys.node(name));
  if (!entry) throw refused(`node "${name}" does not exist`);
  if (!(await store.commit([{ key: entry.key, remove: true, revision: entry.revision }])))
    throw refused(`node "${name}" changed while being deleted; try again`);
  return `node "${name}" deleted\n`;
}
