// What wakes netplug-node's reconciles from the datastore's watch (ts/node/shared/feed-trigger.ts),
// on a fake clock and a feed driven by hand: a key is enqueued when its view of the cluster changes
// after a burst has settled, not on a change that leaves the view as it was; a view of nothing to
// do enqueues nothing (a subsystem's own writes leave it nothing to do); what a reconcile acted on
// is not enqueued again; a feed out of step enqueues every key once.
import test from 'ava';

import type { ClusterState } from '../../ts/node/shared/read-cluster.ts';
import { triggerOnFeed } from '../../ts/node/shared/feed-trigger.ts';
import { FakeClock } from '../helpers/fake-clock.ts';

const cluster = (pools: number): ClusterState => ({
  nodes: [],
  blocks: [],
  pools: Array.from({ length: pools }, () => ({}) as ClusterState['pools'][number]),
  workloads: [],
  tunnelAddresses: new Map(),
  broken: [],
});

function driven() {
  let current: ClusterState | undefined = cluster(1);
  const listeners = new Set<() => void>();
  const enqueued: string[] = [];
  const feed = {
    current: () => current,
    subscribe: (listener: () => void) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  const change = (next: ClusterState | undefined) => {
    current = next;
    for (const listener of listeners) listener();
  };
  return { feed, change, enqueued, controller: { enqueue: (key: string) => void enqueued.push(key) }, listeners };
}

test('a key is enqueued once a burst settles, and only when its view changed', async (t) => {
  const clock = new FakeClock();
  const { feed, change, enqueued, controller } = driven();
  // The view: the number of pools (what a subsystem acting on pools would compare).
  triggerOnFeed(feed, controller, { pools: (c) => String(c.pools.length) }, { settleMs: 200, clock });
  change(cluster(2));
  change(cluster(3));
  await clock.advance(199);
  t.deepEqual(enqueued, [], 'not before the burst settles');
  await clock.advance(1);
  t.deepEqual(enqueued, ['pools'], 'one enqueue for the burst');
  change(cluster(3));
  await clock.advance(200);
  t.deepEqual(enqueued, ['pools'], 'a change that leaves the view as it was wakes nothing');
  change(cluster(1));
  await clock.advance(200);
  t.deepEqual(enqueued, ['pools', 'pools']);
});

test("nothing to do enqueues nothing; what a reconcile acted on is not enqueued again, nor the feed's late echo of it", async (t) => {
  const clock = new FakeClock();
  const { feed, change, enqueued, controller } = driven();
  // A subsystem whose view is the writes left: "publish N" while the cluster has fewer than 3 pools.
  const trigger = triggerOnFeed(
    feed,
    controller,
    { publish: (c) => (c.pools.length < 3 ? `publish ${c.pools.length}` : undefined) },
    { settleMs: 200, clock },
  );
  trigger.acted('publish', 'publish 2');
  change(cluster(2));
  await clock.advance(200);
  t.deepEqual(enqueued, [], 'the work the reconcile did, heard before its write: not again');
  change(cluster(3));
  await clock.advance(200);
  t.deepEqual(enqueued, [], 'its write heard: nothing left, nothing enqueued');
  change(cluster(2));
  await clock.advance(200);
  t.deepEqual(enqueued, ['publish'], 'someone undid the write: work again');
});

test('a feed out of step enqueues every key once; in step again, each key whose view is work', async (t) => {
  const clock = new FakeClock();
  const { feed, change, enqueued, controller } = driven();
  const trigger = triggerOnFeed(feed, controller, { a: () => 'same', b: () => undefined }, { settleMs: 200, clock });
  change(cluster(1));
  await clock.advance(200);
  t.deepEqual(enqueued, ['a']);
  change(undefined);
  change(undefined);
  await clock.advance(200);
  t.deepEqual(enqueued, ['a', 'a', 'b'], 'out of step: every key, once');
  change(undefined);
  await clock.advance(200);
  t.is(enqueued.length, 3);
  change(cluster(1));
  await clock.advance(200);
  t.deepEqual(enqueued, ['a', 'a', 'b', 'a'], 'in step: a again (it may have missed changes); b has nothing to do');
  trigger.stop();
});

test('a view that cannot be made enqueues its key once (its reconcile says why); stop() unsubscribes', async (t) => {
  const clock = new FakeClock();
  const { feed, change, enqueued, controller, listeners } = driven();
  const trigger = triggerOnFeed(
    feed,
    controller,
    {
      address: () => {
        throw new Error('no address');
      },
    },
    { settleMs: 200, clock },
  );
  change(cluster(2));
  await clock.advance(200);
  change(cluster(3));
  await clock.advance(200);
  t.deepEqual(enqueued, ['address']);
  trigger.stop();
  t.is(listeners.size, 0);
});
