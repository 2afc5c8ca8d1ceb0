// Races between netplugctl's pool changes and a concurrent writer, made to happen every time: the
// concurrent write lands (on the real datastore, through a second connection) between netplugctl's
// read and its first commit. For both datastores: test/ctl/pool-update.test.ts (etcd) and
// test/k8s/crd-schemas.test.ts (Kubernetes).
import type { ExecutionContext } from 'ava';

import { updatePool } from '../../ts/ctl/pool-update.ts';
import { createPool, deletePool, getPool } from '../../ts/ctl/pools.ts';
import { assignNext, newBlock } from '../../ts/ipam/block.ts';
import { hostAffinity, keys } from '../../ts/model/keys.ts';
import type { Block } from '../../ts/model/ipam-documents.ts';
import type { Store } from '../../ts/store/store.ts';

/** `store`, but the first commit waits for `concurrently` to finish first. */
function racedBy(store: Store, concurrently: () => Promise<unknown>): { store: Store; commits: () => number } {
  let commits = 0;
  const raced = new Proxy(store, {
    get(target, property) {
      if (property === 'commit') {
        return async (writes: Parameters<Store['commit']>[0]) => {
          if (commits++ === 0) await concurrently();
          return target.commit(writes);
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: raced, commits: () => commits };
}

/** Two updates of different fields at once: the first commit loses, is redone on what the other wrote, and both changes stay. */
export async function updatesDoNotLoseEachOther(t: ExecutionContext, mine: Store, other: Store, cidr: string): Promise<void> {
  await createPool(mine, 'race', { cidr });
  const { store, commits } = racedBy(mine, () => updatePool(other, 'race', { 'nat-outgoing': 'true', 'node-selector': 'has(zone)' }));
  t.is(await updatePool(store, 'race', { disable: true }), 'pool "race" updated: disabled (no new addresses; those allocated stay)\n');
  t.is(commits(), 2, 'the first commit lost to the concurrent writer and was redone');
  t.like(JSON.parse(await getPool(mine, 'race', true)), { disabled: true, natOutgoing: true, nodeSelector: 'has(zone)' });
  await deletePool(mine, 'race');
}

/** An address allocated in one of the pool's blocks while the delete is under way: the delete sees it and is refused. */
export async function deleteSeesConcurrentAllocation(t: ExecutionContext, mine: Store, other: Store, cidr: string): Promise<void> {
  await createPool(mine, 'busy', { cidr, 'block-size': '28' });
  const blockCidr = cidr.replace(/\/\d+$/, '/28');
  t.true(await other.commit([{ key: keys.block(blockCidr), create: newBlock(blockCidr, hostAffinity('node-r'), new Date()) }]));
  const allocateOne = async () => {
    const entry = (await other.get<Block>(keys.block(blockCidr))) as { key: string; value: Block; revision: string };
    assignNext(entry.value, { handle_id: 'net.raced', secondary: { node: 'node-r' } });
    t.true(
      await other.commit([
        { key: keys.handle('net.raced'), create: { handleID: 'net.raced', block: { [blockCidr]: 1 }, deleted: false } },
        { key: entry.key, update: entry.value, revision: entry.revision },
      ]),
    );
  };
  const { store, commits } = racedBy(mine, allocateOne);
  await t.throwsAsync(deletePool(store, 'busy'), {
    message: /^pool "busy" still has 1 allocated address; release them first, or add --force/,
  });
  t.is(commits(), 1, 'the commit that would have deleted the pool lost, and the delete read again');
  t.like(JSON.parse(await getPool(mine, 'busy', true)), { name: 'busy', disabled: false });
}
