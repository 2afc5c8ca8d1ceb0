// Every allocated address in the datastore, with what its allocation records (handle, node, pod).
import { addressOf, attributeAt } from '../ipam/block.ts';
import type { Block } from '../model/ipam-documents.ts';
import { checkedBlocks } from '../model/checked-documents.ts';
import { keys } from '../model/keys.ts';
import type { Entry, Store } from '../store/store.ts';

export interface Allocated {
  address: string;
  handle: string;
  /** The block it lies in, and that block's affinity (`host:<node>` or null). */
  block: string;
  affinity: string | null;
  /** The pod it was allocated for (ADD records namespace and pod in Kubernetes), if any. */
  pod?: { namespace: string; name: string };
  /** The workload endpoint ADD wrote with it: `<namespace>/<name>`. */
  endpoint?: string;
}

export async function readBlocks(store: Store): Promise<Entry<Block>[]> {
  const [v4, v6] = (await store.read([{ list: keys.blocks(4) }, { list: keys.blocks(6) }])) as [Entry<unknown>[], Entry<unknown>[]];
  return checkedBlocks([...v4, ...v6]);
}

export function allocationsIn(block: Block): Allocated[] {
  return block.allocations.flatMap((_, ordinal) => {
    const attribute = attributeAt(block, ordinal);
    if (!attribute) return [];
    const { namespace, pod, endpoint } = attribute.secondary;
    return [
      {
        address: addressOf(block, ordinal),
        handle: attribute.handle_id,
        block: block.cidr,
        affinity: block.affinity,
        ...(namespace && pod ? { pod: { namespace, name: pod } } : {}),
        ...(endpoint ? { endpoint } : {}),
      },
    ];
  });
}

/** `host:<node>` → the node. */
export const affineNode = (affinity: string | null): string | undefined =>
  affinity?.startsWith('host:') ? affinity.slice('host:'.length) : undefined;
