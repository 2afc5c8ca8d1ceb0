// Store.follow, what netplug-node's routes are kept by (ts/node/shared/cluster-feed.ts), against a
// real etcd (gRPC watch) and a real kube-apiserver (client-node informers): the entries under a
// prefix listed, then each change and removal, exactly as the store's own reads give them; nothing
// outside the prefix; nothing after stop(); on etcd, a watch that outlives the request deadline, and
// a connection dropped silently found by keepalive (behind a relay that swallows traffic).
import test from 'ava';

import { newBlock } from '../../ts/ipam/block.ts';
import { keys } from '../../ts/model/keys.ts';
import { openKubeClient } from '../../ts/k8s/client.ts';
import { openGrpcStore } from '../../ts/store/etcd/grpc.ts';
import { Informers } from '../../ts/runtime/informers.ts';
import { followKubernetes } from '../../ts/store/kubernetes/follow.ts';
import { KubeStore } from '../../ts/store/kubernetes/store.ts';
import type { Entry, FollowEvents, Store } from '../../ts/store/store.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { installCrds, startKube } from '../helpers/kube.ts';
import { eventually } from '../helpers/eventually.ts';
import { startRelay } from '../helpers/relay.ts';

/** What a follower has heard: the entries as it keeps them, and how often it was told to list. */
function recorder() {
  const entries = new Map<string, Entry<unknown>>();
  const heard = { lists: 0, failures: 0, entries };
  const events: FollowEvents = {
    listed(listed) {
      heard.lists++;
      entries.clear();
      for (const entry of listed) entries.set(entry.key, entry);
    },
    changed: (entry) => entries.set(entry.key, entry),
    removed: (key) => entries.delete(key),
    failed: () => heard.failures++,
  };
  return { heard, events };
}

/** The follower holds exactly what the store lists under `prefix`, revisions included. */
async function inStepWith(store: Store, prefix: string, entries: Map<string, Entry<unknown>>, what: string): Promise<void> {
  const text = (list: Entry<unknown>[]) => JSON.stringify(list.sort((a, b) => a.key.localeCompare(b.key)));
  await eventually(what, async () => text([...entries.values()]) === text(await store.list(prefix)), { timeoutMs: 60_000 });
}

test('etcd over gRPC: listed, then every change and removal under the prefix, none after stop', async (t) => {
  const etcd = await startEtcd(t);
  const store = await openGrpcStore(etcd.netconf);
  t.teardown(() => store.close());
  const prefix = '/netplug/test/followed/';
  await store.commit([
    { key: `${prefix}a`, create: { n: 1 } },
    { key: `${prefix}b`, create: { n: 2 } },
  ]);
  const { heard, events } = recorder();
  const follow = store.follow;
  if (!follow) throw new Error('the gRPC store cannot follow');
  const following = follow.call(store, prefix, events);
  t.teardown(() => following.stop());
  await eventually('the first list', () => heard.lists === 1);
  t.deepEqual([...heard.entries.keys()].sort(), [`${prefix}a`, `${prefix}b`]);

  const a = await store.get(`${prefix}a`);
  const b = await store.get(`${prefix}b`);
  await store.commit([
    { key: `${prefix}a`, update: { n: 10 }, revision: a?.revision ?? '' },
    { key: `${prefix}b`, remove: true, revision: b?.revision ?? '' },
    { key: `${prefix}c`, create: { n: 3 } },
    { key: '/netplug/test/other', create: { n: 4 } },
  ]);
  await inStepWith(store, prefix, heard.entries, 'a changed, b removed, c created');
  t.false(heard.entries.has('/netplug/test/other'));

  following.stop();
  await store.commit([{ key: `${prefix}d`, create: { n: 5 } }]);
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.false(heard.entries.has(`${prefix}d`), 'nothing after stop()');
  t.is(heard.failures, 0);
});

test('etcd over gRPC: a follower across an etcd restart is told, and is in step with what changed after', async (t) => {
  const etcd = await startEtcd(t);
  const store = await openGrpcStore(etcd.netconf);
  t.teardown(() => store.close());
  const prefix = '/netplug/test/restarted/';
  await store.commit([{ key: `${prefix}a`, create: { n: 1 } }]);
  const { heard, events } = recorder();
  const following = store.follow?.(prefix, events);
  t.teardown(() => following?.stop());
  await eventually('the first list', () => heard.lists === 1);
  await etcd.stop();
  await eventually('the follower is told the watch broke', () => heard.failures > 0);
  await etcd.start();
  await eventually('listed again', () => heard.lists > 1);
  await store.commit([{ key: `${prefix}b`, create: { n: 2 } }]);
  await inStepWith(store, prefix, heard.entries, 'b, created after the restart, is followed');
  t.deepEqual([...heard.entries.keys()].sort(), [`${prefix}a`, `${prefix}b`]);
});

test('etcd over gRPC: a watch outlives the request deadline; a connection dropped silently is found by keepalive, and the follower lists again once the network is back', async (t) => {
  // A watch stream has no request deadline (it had one, and failed every 10 s). A connection the
  // network drops without a word (no FIN, no RST: a host gone, a firewall that forgot the flow)
  // is found by pings that go unanswered (every 30 s while a call is open, 10 s to answer);
  // without them TCP would notice only on a write's retransmissions, and routes would follow
  // nothing for many minutes. Here the deadline is 3 s and pings go every 6 s (etcd refuses them
  // more often than every 5 s) with 2 s to answer, so the test waits seconds, not a minute.
  const etcd = await startEtcd(t);
  const direct = await openGrpcStore(etcd.netconf);
  t.teardown(() => direct.close());
  const wire = await startRelay(t, etcd.port);
  const relayed = await openGrpcStore(
    { ...etcd.netconf, etcd_endpoints: `http://${wire.address}` },
    { requestTimeoutMs: 3_000, keepaliveTimeMs: 6_000, keepaliveTimeoutMs: 2_000 },
  );
  t.teardown(() => relayed.close());
  const prefix = '/netplug/test/keepalive/';
  await direct.commit([{ key: `${prefix}a`, create: { n: 1 } }]);
  const { heard, events } = recorder();
  const following = relayed.follow?.(prefix, events);
  t.teardown(() => following?.stop());
  await eventually('the first list', () => heard.lists === 1);
  // Past the deadline twice over, and past an answered ping.
  await new Promise((resolve) => setTimeout(resolve, 7_000));
  t.is(heard.failures, 0, 'a healthy watch lives past the request deadline');

  // From here nothing arrives either way, and nothing closes: only unanswered pings can tell.
  wire.hold('both ways');
  await direct.commit([{ key: `${prefix}b`, create: { n: 2 } }]);
  await eventually('the follower is told its connection is dead', () => heard.failures > 0, { timeoutMs: 60_000 });
  t.false(heard.entries.has(`${prefix}b`), 'the change made meanwhile never arrived over the dead connection');

  wire.release();
  await direct.commit([{ key: `${prefix}c`, create: { n: 3 } }]);
  await inStepWith(direct, prefix, heard.entries, 'in step once the network is back');
  t.true(heard.lists >= 2, 'listed again after the failure');
  t.deepEqual([...heard.entries.keys()].sort(), [`${prefix}a`, `${prefix}b`, `${prefix}c`]);
});

test('Kubernetes datastore through informers: IPv4 blocks listed, then each change and removal, as the store reads them; every block under keys.allBlocks', async (t) => {
  const kube = await startKube(t);
  await installCrds(kube);
  const store = new KubeStore(await openKubeClient({ kubeconfig: kube.server.admin.kubeconfig }));
  t.teardown(() => store.close());
  const prefix = keys.blocks(4);
  const now = new Date();
  await store.commit([
    { key: keys.block('10.9.0.0/26'), create: newBlock('10.9.0.0/26', 'host:n1', now) },
    { key: keys.block('fd00:9::/122'), create: newBlock('fd00:9::/122', 'host:n1', now) },
  ]);
  const { heard, events } = recorder();
  const logged: string[] = [];
  const log = { info: (m: string) => logged.push(m), warning: (m: string) => logged.push(m) };
  const config = kube.config;
  const informers = new Informers(config, { log });
  informers.start();
  t.teardown(() => informers.stop());
  const following = followKubernetes(config, informers)(prefix, events);
  t.teardown(() => following.stop());
  await eventually('the first list', () => heard.lists === 1);
  await inStepWith(store, prefix, heard.entries, 'the IPv4 block listed, not the IPv6 one');
  t.deepEqual([...heard.entries.keys()], [keys.block('10.9.0.0/26')]);
  // Every block, of both families (what netplug-node follows for routes and pool usage).
  const every = recorder();
  const followingEvery = followKubernetes(config, informers)(keys.allBlocks, every.events);
  t.teardown(() => followingEvery.stop());
  await eventually('every block listed', () => every.heard.lists === 1);
  t.deepEqual([...every.heard.entries.keys()].sort(), [keys.block('10.9.0.0/26'), keys.block('fd00:9::/122')].sort());

  const first = await store.get(keys.block('10.9.0.0/26'));
  await store.commit([
    { key: keys.block('10.9.0.0/26'), update: newBlock('10.9.0.0/26', 'host:n2', now), revision: first?.revision ?? '' },
    { key: keys.block('10.9.1.0/26'), create: newBlock('10.9.1.0/26', 'host:n3', now) },
  ]);
  await inStepWith(store, prefix, heard.entries, 'the affinity changed, a block created');
  const second = await store.get(keys.block('10.9.1.0/26'));
  await store.commit([{ key: keys.block('10.9.1.0/26'), remove: true, revision: second?.revision ?? '' }]);
  await inStepWith(store, prefix, heard.entries, 'the block removed');
  await inStepWith(store, keys.allBlocks, every.heard.entries, 'every block, after the changes');
  t.is(heard.failures + every.heard.failures, 0, logged.join('; '));
});
