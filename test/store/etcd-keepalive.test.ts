// The gRPC client's watch over time (ts/store/etcd/grpc.ts). A watch stream is not a request: it
// has no deadline, and stays up for as long as it is healthy (netplug-node's follows every node's
// blocks with one). A connection the network drops without a word (no FIN, no RST: a host gone, a
// firewall that forgot the flow) is found by pings that go unanswered, every 30 s while a call is
// open, with 10 s to answer; without them TCP would notice only on a write's retransmissions, and
// routes would follow nothing for many minutes. Real etcd, behind a relay that swallows traffic.
import test from 'ava';

import { openGrpcStore } from '../../ts/store/etcd/grpc.ts';
import type { Entry, FollowEvents } from '../../ts/store/store.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { until } from '../helpers/nodes.ts';
import { startWireHold } from '../helpers/wire-hold.ts';

test('etcd over gRPC: a watch outlives the request deadline; a connection dropped silently is found by keepalive, and the follower lists again once the network is back', async (t) => {
  const etcd = await startEtcd(t);
  const direct = await openGrpcStore(etcd.netconf);
  t.teardown(() => direct.close());
  const wire = await startWireHold(t, { host: '127.0.0.1', port: etcd.port });
  const relayed = await openGrpcStore({ ...etcd.netconf, etcd_endpoints: `http://${wire.address}` });
  t.teardown(() => relayed.close());
  const prefix = '/netplug/test/keepalive/';
  await direct.commit([{ key: `${prefix}a`, create: { n: 1 } }]);

  const entries = new Map<string, Entry<unknown>>();
  const heard = { lists: 0, failures: [] as string[] };
  const events: FollowEvents = {
    listed(listed) {
      heard.lists++;
      entries.clear();
      for (const entry of listed) entries.set(entry.key, entry);
    },
    changed: (entry) => entries.set(entry.key, entry),
    removed: (key) => entries.delete(key),
    failed: (err) => heard.failures.push(err.message),
  };
  const follow = relayed.follow;
  if (!follow) throw new Error('the gRPC store cannot follow');
  const following = follow.call(relayed, prefix, events);
  t.teardown(() => following.stop());
  await until('the first list', () => heard.lists === 1);
  // The watch lives on: a stream has no request deadline (it had one, and failed every 10 s).
  await new Promise((resolve) => setTimeout(resolve, 12_000));
  t.deepEqual(heard.failures, [], 'a healthy watch is not failed');

  // From here nothing the client sends arrives, and nothing closes: only unanswered pings can tell.
  wire.hold('both ways');
  await direct.commit([{ key: `${prefix}b`, create: { n: 2 } }]);
  await until('the follower told that its connection is dead', () => heard.failures.length > 0, 60_000);
  t.false(entries.has(`${prefix}b`), 'the change made while the connection was dead never arrived over it');

  wire.release();
  await direct.commit([{ key: `${prefix}c`, create: { n: 3 } }]);
  const text = (list: Entry<unknown>[]) => JSON.stringify(list.sort((x, y) => x.key.localeCompare(y.key)));
  await until('the follower in step again', async () => text([...entries.values()]) === text(await direct.list(prefix)), 60_000);
  t.true(heard.lists >= 2, 'listed again after the failure');
  t.deepEqual([...entries.keys()].sort(), [`${prefix}a`, `${prefix}b`, `${prefix}c`]);
});
