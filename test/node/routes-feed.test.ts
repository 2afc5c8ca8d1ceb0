// The cluster as netplug-node's routes follow it (ts/node/shared/cluster-feed.ts), driven by hand
// through its follow function (pure logic; the real watches are test/store/follow.test.ts): in step
// only once nodes, blocks, pools and workloads are all listed, out of step while any has failed, changes
// applied as they come; the digest moves with what routes depend on and not with an allocation.
import test from 'ava';

import { assignOrdinal, newBlock } from '../../ts/ipam/block.ts';
import { API_VERSION } from '../../ts/model/entry.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { digestOf, followCluster, USAGE_PREFIXES } from '../../ts/node/shared/cluster-feed.ts';
import type { Entry, FollowEvents } from '../../ts/store/store.ts';

function driven(prefixes?: readonly string[]) {
  const followed = new Map<string, FollowEvents>();
  let stopped = 0;
  const feed = followCluster((prefix, events) => {
    followed.set(prefix, events);
    return { stop: () => stopped++ };
  }, prefixes);
  const at = (prefix: string) => followed.get(prefix) as FollowEvents;
  return { feed, at, stopped: () => stopped };
}

const entry = (key: string, value: unknown, revision = '1'): Entry<unknown> => ({ key, value, revision });
const node = (name: string, address: string, revision = '1') =>
  entry(
    keys.node(name),
    { kind: 'Node', apiVersion: API_VERSION, metadata: { name, labels: {} }, spec: { bgp: { ipv4Address: address } } },
    revision,
  );
const pool = entry(keys.pool('p'), poolResource('p', { cidr: '10.244.0.0/16' }, new Date(0)));

test('in step once nodes, blocks, pools and workloads are listed; changes and removals applied; out of step after a failure', async (t) => {
  const { feed, at, stopped } = driven();
  const block = newBlock('10.244.1.0/26', 'host:b', new Date(0));
  at(keys.nodes).listed([node('b', '10.0.0.2/24')]);
  at(keys.allBlocks).listed([entry(keys.block(block.cidr), block)]);
  at(keys.workloadEndpoints).listed([]);
  t.is(feed.current(), undefined, 'the pools are not listed yet');
  const before = feed.version();
  const heard = feed.next(before);
  at(keys.pools).listed([pool]);
  await heard;
  t.is(feed.version(), before + 1);
  await feed.next(before); // heard already: at once
  t.deepEqual(
    feed.current()?.blocks.map((b) => [b.cidr, b.node]),
    [['10.244.1.0/26', 'b']],
  );
  t.is(feed.current()?.pools.length, 1);

  at(keys.nodes).changed(node('c', '10.0.0.3/24'));
  at(keys.nodes).changed(node('b', '10.0.0.9/24', '2'));
  t.deepEqual(
    feed.current()?.nodes.map((n) => [n.name, n.address?.address]),
    [
      ['b', '10.0.0.9'],
      ['c', '10.0.0.3'],
    ],
  );
  at(keys.nodes).removed(keys.node('c'));
  t.deepEqual(
    feed.current()?.nodes.map((n) => n.name),
    ['b'],
  );

  at(keys.allBlocks).failed(new Error('watch broke'));
  t.is(feed.current(), undefined, 'out of step until the blocks are listed again');
  at(keys.allBlocks).listed([]);
  t.deepEqual(feed.current()?.blocks, []);
  feed.stop();
  t.is(stopped(), 4);
});

test('the digest follows what routes depend on: an affinity or a borrowed address, not a local allocation', (t) => {
  const { feed, at } = driven();
  const block = newBlock('10.244.1.0/26', 'host:b', new Date(0));
  at(keys.nodes).listed([node('b', '10.0.0.2/24')]);
  at(keys.allBlocks).listed([entry(keys.block(block.cidr), structuredClone(block))]);
  at(keys.pools).listed([pool]);
  at(keys.workloadEndpoints).listed([]);
  const first = digestOf(feed.current() as NonNullable<ReturnType<typeof feed.current>>);
  const digest = () => digestOf(feed.current() as NonNullable<ReturnType<typeof feed.current>>);

  const allocated = structuredClone(block);
  assignOrdinal(allocated, 3, { handle_id: 'net.pod', secondary: { node: 'b' } });
  at(keys.allBlocks).changed(entry(keys.block(block.cidr), allocated, '2'));
  t.is(digest(), first, "a pod on the block's own node changes no route");

  const borrowed = structuredClone(allocated);
  assignOrdinal(borrowed, 4, { handle_id: 'net.other', secondary: { node: 'c' } });
  at(keys.allBlocks).changed(entry(keys.block(block.cidr), borrowed, '3'));
  t.not(digest(), first, 'an address borrowed by another node is routed to it');

  const moved = newBlock('10.244.1.0/26', 'host:c', new Date(0));
  at(keys.allBlocks).changed(entry(keys.block(block.cidr), moved, '4'));
  t.not(digest(), first, 'a block claimed by another node');
});

test('every block is followed: routes lead to IPv4 and IPv6 blocks (in key order); entries() per prefix; a feed without nodes has no routes', (t) => {
  const { feed, at } = driven();
  const v4 = newBlock('10.244.1.0/26', 'host:b', new Date(0));
  const v6 = newBlock('fd00:244::/122', 'host:b', new Date(0));
  at(keys.nodes).listed([node('b', '10.0.0.2/24')]);
  at(keys.allBlocks).listed([entry(keys.block(v6.cidr), v6), entry(keys.block(v4.cidr), v4)]);
  at(keys.workloadEndpoints).listed([]);
  t.is(feed.entries(keys.pools), undefined, 'not listed yet');
  at(keys.pools).listed([pool]);
  t.deepEqual(
    feed.current()?.blocks.map((b) => b.cidr),
    ['10.244.1.0/26', 'fd00:244::/122'],
  );
  t.deepEqual(
    feed.entries(keys.allBlocks)?.map((e) => e.key),
    [keys.block(v4.cidr), keys.block(v6.cidr)].sort(),
  );
  t.is(feed.entries(keys.blocks(4)), undefined, 'not a followed prefix');

  const usage = driven(USAGE_PREFIXES);
  t.is(usage.at(keys.nodes) as FollowEvents | undefined, undefined, 'nodes are not followed');
  usage.at(keys.allBlocks).listed([entry(keys.block(v6.cidr), v6)]);
  usage.at(keys.pools).listed([pool]);
  t.is(usage.feed.current(), undefined, 'no routes without nodes');
  t.is(usage.feed.entries(keys.allBlocks)?.length, 1);
});
