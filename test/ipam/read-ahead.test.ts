// An ADD's read-ahead with a resident agent's knowledge (the blocks its node had last): read in
// the same round trip as the first reads, they give the very blocks two round trips give, and a
// stale one costs the second round trip, never a wrong block.
import test from 'ava';

import { KnownNodes } from '../../ts/ipam/known-nodes.ts';
import { addReads, readAhead, type ReadAhead } from '../../ts/ipam/read-ahead.ts';
import { handleId, keys } from '../../ts/model/keys.ts';
import { releaseWhere, type ReadForRelease } from '../../ts/ipam/release.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Entry, Store } from '../../ts/store/store.ts';
import { added, ctlOk, ipamNetconf, totalAllocated } from '../helpers/ipam.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';

const NODE = 'node-hints';

/** `store`, counting its reads (round trips). */
function counted(store: Store): { store: Store; reads: () => number } {
  let reads = 0;
  const wrapped = new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property === 'read')
        return (...args: Parameters<Store['read']>) => {
          reads++;
          return target.read(...args);
        };
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: wrapped, reads: () => reads };
}

/** What was read, without the agent's count of its commits that came with it. */
const readOf = ({ results, blocks }: ReadAhead): ReadAhead => ({ results, blocks });

test('known blocks are read with the first reads; a stale one is read again, the affinities decide', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'hints', '--cidr', '10.69.0.0/16');
  const netconf = ipamNetconf(etcd, { node: NODE, name: 'hints' });
  added(t, { containerId: containerId(), netns: createNetns(t, 'hints').path, netconf });
  const opened = await openStore(etcd.netconf);
  t.teardown(() => opened.close());
  const reads = addReads(handleId('hints', containerId()), NODE, [4], []);

  const plain = counted(opened);
  const expected = await readAhead(plain.store, reads, [4]);
  t.is(plain.reads(), 2, 'without hints: the first reads, then the blocks');
  const cidrs = Object.keys(expected.blocks);
  t.is(cidrs.length, 1, 'the node has the block of its pod');

  const nodes = new KnownNodes();
  const cold = counted(opened);
  t.deepEqual(readOf(await readAhead(cold.store, reads, [4], { node: NODE, nodes })), expected);
  t.is(cold.reads(), 2, 'nothing known yet: two round trips');
  t.deepEqual(Object.keys(nodes.blocks(NODE)), cidrs, 'and the node remembered');

  const warm = counted(opened);
  t.deepEqual(readOf(await readAhead(warm.store, reads, [4], { node: NODE, nodes })), expected);
  t.is(warm.reads(), 1, 'known: one round trip');

  nodes.remember(NODE, { ...(nodes.fresh(NODE) as NonNullable<ReturnType<KnownNodes['fresh']>>), blocks: { '10.69.255.0/26': null } });
  const stale = counted(opened);
  t.deepEqual(readOf(await readAhead(stale.store, reads, [4], { node: NODE, nodes })), expected, 'a block not affine is not used');
  t.is(stale.reads(), 2);
  t.deepEqual(Object.keys(nodes.blocks(NODE)), cidrs);
});

test('a release from what was read before another release changed the block: the commit fails, it reads again, both are released', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'stale', '--cidr', '10.70.0.0/16');
  const netconf = ipamNetconf(etcd, { node: NODE, name: 'stale' });
  const [first, second] = [containerId(), containerId()];
  for (const id of [first, second]) added(t, { containerId: id, netns: createNetns(t, 'stale').path, netconf });
  const store = await openStore(etcd.netconf);
  t.teardown(() => store.close());
  const [handle] = await store.read([{ get: keys.handle(handleId('stale', first)) }]);
  const cidrs = Object.keys((handle as Entry<{ block: Record<string, number> }>).value.block);
  const blocks = await store.read(cidrs.map((cidr) => ({ get: keys.block(cidr) })));
  const known: ReadForRelease = {
    handle: handle as Entry<unknown>,
    blocks: Object.fromEntries(cidrs.map((cidr, i) => [cidr, blocks[i] as Entry<unknown>])),
  };

  const other = await releaseWhere(store, handleId('stale', second), () => true);
  t.is(other.length, 1);
  const counted = { reads: 0 };
  const watched = new Proxy(store, {
    get(target, property) {
      if (property === 'get' || property === 'read') counted.reads++;
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const released = await releaseWhere(watched, handleId('stale', first), () => true, undefined, known);
  t.is(released.length, 1, "the first pod's address released all the same");
  t.true(counted.reads > 0, 'after reading again');
  t.is(totalAllocated(t, etcd), 0);
  t.deepEqual(await store.read([{ get: keys.handle(handleId('stale', first)) }]), [undefined]);
});
