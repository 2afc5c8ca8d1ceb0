// CNI GC for netplug-ipam: this network's addresses on this node whose attachment the runtime no
// longer lists as valid are released. Other nodes' addresses are theirs to collect.
import type { Store } from '../store/store.ts';
import { releaseWhere } from './release.ts';
import { keys } from './model.ts';

export interface Attachment {
  containerId: string;
  ifname: string;
}

export async function collectGarbage(store: Store, network: string, node: string, valid: readonly Attachment[]): Promise<string[]> {
  const attachments = new Set(valid.map((a) => `${a.containerId}/${a.ifname}`));
  const containers = new Set(valid.map((a) => a.containerId));
  const released: string[] = [];
  for (const key of await store.listKeys(keys.handle(`${network}.`))) {
    const handle = key.slice(keys.handles.length);
    const containerId = handle.slice(network.length + 1);
    released.push(
      ...(await releaseWhere(store, handle, ({ secondary }) => {
        if (secondary['node'] !== node) return false;
        const ifname = secondary['ifname'];
        return ifname ? !attachments.has(`${containerId}/${ifname}`) : !containers.has(containerId);
      })),
    );
  }
  return released;
}
