// CNI GC for netplug-ipam: this network's addresses on this node whose attachment the runtime no
// longer lists as valid are released. Other nodes' addresses are theirs to collect, and their
// handles are never read or written here: this node's attachments are found by the allocations
// in the blocks (each records its node), any block, as a node may hold addresses in a block it
// borrowed. A handle holding no address cannot be told to be this node's (another node may be
// in the middle of an ADD that wrote it first): DEL releases it, never GC.
import { CniError, ErrorCode } from '../cni/errors.ts';
import type { Entry, Store } from '../store/store.ts';
import { attributeAt } from './block.ts';
import { keys } from '../model/keys.ts';
import { checkedBlocks } from '../model/checked-documents.ts';
import { releaseWhere } from './release.ts';

export interface Attachment {
  containerId: string;
  ifname: string;
}

const LIST_FIELD = 'cni.dev/valid-attachments';
/** How much of a bad entry an error message repeats. */
const ECHO_LIMIT = 120;

/**
 * `cni.dev/valid-attachments` of a GC request (libcni also sends the misspelled
 * `cni.dev/attachments`). Required: a GC without it would release everything on the node. `null`
 * is how libcni (Go) writes an empty list.
 */
export function validAttachments(json: Record<string, unknown>): Attachment[] {
  const given = [json[LIST_FIELD], json['cni.dev/attachments']].filter((list) => list !== undefined);
  if (given.length === 0) {
    throw new CniError(
      ErrorCode.InvalidConfig,
      `netconf field "${LIST_FIELD}" is missing: GC needs the list of valid attachments (an empty list, to release every attachment of this network on this node)`,
    );
  }
  const list = given.find((each) => each !== null);
  if (list === undefined) return [];
  if (!Array.isArray(list)) throw new CniError(ErrorCode.InvalidConfig, `netconf field "${LIST_FIELD}" must be a list`);
  return list.map((item: unknown, index) => {
    const { containerID, ifname } = (item ?? {}) as { containerID?: unknown; ifname?: unknown };
    if (typeof containerID !== 'string' || typeof ifname !== 'string') {
      const shown = JSON.stringify(item) ?? String(item);
      throw new CniError(
        ErrorCode.InvalidConfig,
        `netconf field "${LIST_FIELD}[${index}]" needs string containerID and ifname, got ${shown.length > ECHO_LIMIT ? `${shown.slice(0, ECHO_LIMIT)}…` : shown}`,
      );
    }
    return { containerId: containerID, ifname };
  });
}

export async function collectGarbage(store: Store, network: string, node: string, valid: readonly Attachment[]): Promise<string[]> {
  const attachments = new Set(valid.map((a) => `${a.containerId}/${a.ifname}`));
  const containers = new Set(valid.map((a) => a.containerId));
  const prefix = `${network}.`;
  const stale = (handle: string, secondary: Record<string, string>): boolean => {
    if (secondary['node'] !== node || !handle.startsWith(prefix)) return false;
    const containerId = handle.slice(prefix.length);
    const ifname = secondary['ifname'];
    return ifname ? !attachments.has(`${containerId}/${ifname}`) : !containers.has(containerId);
  };
  const [v4, v6] = (await store.read([{ list: keys.blocks(4) }, { list: keys.blocks(6) }])) as [Entry<unknown>[], Entry<unknown>[]];
  const handles = new Set<string>();
  for (const { value: block } of checkedBlocks([...v4, ...v6])) {
    for (let ordinal = 0; ordinal < block.allocations.length; ordinal++) {
      const attribute = attributeAt(block, ordinal);
      if (attribute && stale(attribute.handle_id, attribute.secondary)) handles.add(attribute.handle_id);
    }
  }
  const released: string[] = [];
  for (const handle of handles) released.push(...(await releaseWhere(store, handle, ({ secondary }) => stale(handle, secondary))));
  return released;
}
