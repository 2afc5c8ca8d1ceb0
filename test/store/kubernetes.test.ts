// The Store on a real kube-apiserver's custom resources: compare-and-swap through
// resourceVersion, a commit that fails part-way undone (all or nothing, as on etcd), over HTTP/1.1
// connections and over one HTTP/2 connection (a resident program's), prefix reads narrowed by
// labels yet exact, and names for keys no object name could hold.
import test, { type ExecutionContext } from 'ava';

import { keys } from '../../ts/model/keys.ts';
import { openKubeClient } from '../../ts/k8s/client.ts';
import { openHttp2 } from '../../ts/net/http2-client.ts';
import { KubeStore } from '../../ts/store/kubernetes/store.ts';
import { objectName } from '../../ts/store/kubernetes/resources.ts';
import { installCrds, startKube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

let store: KubeStore;
let kubeconfig: string;
/** A handle-shaped document (the schema of ipamhandles refuses others), told apart by `n`. */
const handle = (n: number) => ({ handleID: 'net.x', block: { '10.9.0.0/26': n }, deleted: false });
const shared = sharedTeardowns(test);

test.before(async () => {
  const kube = await startKube(shared);
  await installCrds(kube);
  kubeconfig = kube.server.admin.kubeconfig;
  store = new KubeStore(await openKubeClient({ kubeconfig }));
  shared.teardown(() => store.close());
});

/** Compare-and-swap and all-or-nothing commits through `store`, on handles named `<prefix>a` and `<prefix>b`. */
async function casAndAllOrNothing(t: ExecutionContext, store: KubeStore, prefix: string): Promise<void> {
  const a = keys.handle(`${prefix}a`);
  const b = keys.handle(`${prefix}b`);
  t.true(await store.commit([{ key: a, create: handle(1) }]));
  t.false(await store.commit([{ key: a, create: handle(2) }]), 'create fails on an existing key');
  const first = await store.get<ReturnType<typeof handle>>(a);
  t.deepEqual(first?.value, handle(1));
  t.true(await store.commit([{ key: a, update: handle(2), revision: first?.revision ?? '' }]));
  t.false(await store.commit([{ key: a, update: handle(3), revision: first?.revision ?? '' }]), 'a stale revision fails');

  const current = await store.get<ReturnType<typeof handle>>(a);
  t.false(
    await store.commit([
      { key: b, create: handle(10) },
      { key: a, update: handle(4), revision: first?.revision ?? '' },
    ]),
  );
  t.is(await store.get(b), undefined, 'the create before the failed write is undone');
  t.false(
    await store.commit([
      { key: a, update: handle(5), revision: current?.revision ?? '' },
      { key: b, remove: true, revision: '1' },
    ]),
  );
  t.deepEqual((await store.get(a))?.value, handle(2), 'the update before the failed write is undone');
  const now = await store.get(a);
  t.false(
    await store.commit([
      { key: a, remove: true, revision: now?.revision ?? '' },
      { key: b, update: handle(0), revision: '1' },
    ]),
  );
  t.deepEqual((await store.get(a))?.value, handle(2), 'the delete before the failed write is undone');

  t.true(
    await store.commit([
      { key: b, create: handle(10) },
      { key: a, remove: true, revision: (await store.get(a))?.revision ?? '' },
    ]),
  );
  t.deepEqual(
    (await store.list(keys.handles)).map((e) => [e.key, e.value]),
    [[b, handle(10)]],
  );
  t.deepEqual(await store.listKeys(keys.handles), [b]);
  t.true(await store.commit([{ key: b, remove: true, revision: (await store.get(b))?.revision ?? '' }]));
}

test.serial('create, update and delete only when the resourceVersion still holds; a commit is all or nothing', (t) =>
  casAndAllOrNothing(t, store, 'net.'),
);

test.serial('over one HTTP/2 connection: the same, and a commit sends the writes before the last at once over it', async (t) => {
  const client = await openKubeClient({ kubeconfig }, { multiplexWith: openHttp2 });
  t.teardown(() => client.close());
  t.true(client.multiplexed);
  const multiplexed = new KubeStore(client);
  await casAndAllOrNothing(t, multiplexed, 'net.h2');

  const [a, b, c] = ['net.h2fa', 'net.h2fb', 'net.h2fc'].map((h) => keys.handle(h)) as [string, string, string];
  t.true(await store.commit([{ key: a, create: handle(1) }]));
  const stale = (await store.get(a))?.revision ?? '';
  t.true(await store.commit([{ key: a, update: handle(2), revision: stale }]));
  const before = client.requests;
  t.false(
    await multiplexed.commit([
      { key: b, create: handle(10) },
      { key: c, create: handle(11) },
      { key: a, update: handle(3), revision: stale },
    ]),
    'the last write fails',
  );
  // Two creates, the failed update, two deletes undoing the creates (their options in a body).
  t.is(client.requests - before, 5);
  t.is(await store.get(b), undefined, 'what went at once is undone');
  t.is(await store.get(c), undefined);
  t.true(await store.commit([{ key: a, remove: true, revision: (await store.get(a))?.revision ?? '' }]));
});

test.serial(
  'with spare connections the writes before the last go out at once, one per connection, and all or nothing still holds',
  async (t) => {
    const spares = [await openKubeClient({ kubeconfig }), await openKubeClient({ kubeconfig })];
    const main = await openKubeClient({ kubeconfig });
    const fanned = new KubeStore(main, spares);
    t.teardown(() => {
      for (const client of [main, ...spares]) client.close();
    });
    const [a, b, c, d] = ['net.fa', 'net.fb', 'net.fc', 'net.fd'].map((h) => keys.handle(h)) as [string, string, string, string];
    t.true(await store.commit([{ key: a, create: handle(1) }]));
    const stale = (await store.get(a))?.revision ?? '';
    t.true(await store.commit([{ key: a, update: handle(2), revision: stale }]));

    const sent = () => [main, ...spares].map((client) => client.requests);
    const before = sent();
    t.false(
      await fanned.commit([
        { key: d, absent: true },
        { key: b, create: handle(10) },
        { key: c, create: handle(11) },
        { key: a, update: handle(3), revision: stale },
      ]),
      'the last write fails',
    );
    t.true(
      sent().every((n, i) => n > (before[i] as number)),
      'every connection carried one of the writes before the last',
    );
    t.is(await store.get(b), undefined, 'what went at once is undone');
    t.is(await store.get(c), undefined);

    t.false(
      await fanned.commit([
        { key: b, create: handle(10) },
        { key: a, update: handle(3), revision: stale },
        { key: c, create: handle(11) },
      ]),
      'a write before the last fails',
    );
    t.is(await store.get(b), undefined, 'the others sent with it are undone');
    t.is(await store.get(c), undefined, 'the last is never sent');
    t.deepEqual((await store.get(a))?.value, handle(2));

    t.true(
      await fanned.commit([
        { key: b, create: handle(10) },
        { key: c, create: handle(11) },
        { key: d, create: handle(12) },
      ]),
    );
    t.deepEqual(
      (await Promise.all([b, c, d].map((key) => store.get(key)))).map((e) => e?.value),
      [handle(10), handle(11), handle(12)],
    );
    for (const key of [a, b, c, d]) t.true(await store.commit([{ key, remove: true, revision: (await store.get(key))?.revision ?? '' }]));
  },
);

test('prefix reads return exactly the keys under the prefix', async (t) => {
  const writes = [
    keys.affinity('node-x', '10.9.0.0/26'),
    keys.affinity('node-x', 'fd09::/122'),
    keys.affinity('node-xy', '10.9.0.64/26'),
    keys.affinity('a-very-long-node-name-that-is-longer-than-any-label-value-may-be.example.com', '10.9.1.0/26'),
  ];
  t.true(await store.commit(writes.map((key) => ({ key, create: { state: 'confirmed', deleted: false } }))));
  t.deepEqual(await store.listKeys(keys.affinities('node-x', 4)), [writes[0]]);
  t.deepEqual(await store.listKeys(keys.affinities('node-x', 6)), [writes[1]]);
  t.deepEqual(
    (await store.list(keys.affinities(writes[3]?.split('/')[5] ?? '', 4))).map((e) => e.key),
    [writes[3]],
  );
  t.deepEqual((await store.listKeys(keys.allAffinities)).sort(), [...writes].sort());
});

test('object names: keys that are names stay readable, others get a hash and stay distinct', (t) => {
  t.is(objectName('10.0.0.0-26'), '10.0.0.0-26');
  t.regex(objectName('fd00::-122'), /^fd00--122-[0-9a-f]{16}$/);
  t.not(objectName('Net.A'), objectName('net.a'));
  t.true(objectName('x'.repeat(400)).length <= 253);
});
