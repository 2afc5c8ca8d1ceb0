// The etcd datastore against a real etcd, through both clients (the JSON gateway's, which the
// one-shot plugin uses, and gRPC's, which netplug-node uses): compare-and-swap commits, prefixes,
// failover, mutual TLS with a multi-root trust bundle, and unreachable endpoints named in the error.
import test from 'ava';

import { prefixEnd } from '../../ts/store/etcd/client.ts';
import { openGrpcStore } from '../../ts/store/etcd/grpc.ts';
import { EtcdSettingsError, gatewayOptions } from '../../ts/store/etcd/options.ts';
import { openStore } from '../../ts/store/open.ts';
import { StoreError, StoreUnavailableError, type Store } from '../../ts/store/store.ts';
import { startEtcd } from '../helpers/etcd.ts';

const clients = { gateway: openStore, grpc: openGrpcStore } satisfies Record<string, (settings: Record<string, string>) => Promise<Store>>;

test('prefix ranges end where the prefix does', (t) => {
  t.is(prefixEnd('/netplug/ipam/').toString(), '/netplug/ipam0');
  t.is(prefixEnd('/a').toString(), '/b');
});

test('settings that cannot work name their field', async (t) => {
  const fail = (settings: Record<string, string>) => t.throwsAsync(gatewayOptions(settings), { instanceOf: EtcdSettingsError });
  t.regex((await fail({ etcd_endpoints: 'etcd-1:2379' }))?.message ?? '', /"etcd-1:2379" must be an http:\/\/ or https:\/\/ URL/);
  t.regex(
    (await fail({ etcd_endpoints: 'http://a:2379', etcd_ca_cert_file: '/nonexistent/ca.pem' }))?.message ?? '',
    /cannot read \/nonexistent\/ca\.pem: ENOENT/,
  );
  const err = await fail({ etcd_authority: '10.0.0.1:2379', etcd_scheme: 'http', etcd_ca_cert_file: '/etc/hostname' });
  t.is(err?.field, 'etcd_scheme');
  const legacy = await gatewayOptions({ etcd_authority: '10.0.0.9:4001', etcd_scheme: 'http' });
  t.deepEqual(
    legacy.endpoints.map((u) => u.origin),
    ['http://10.0.0.9:4001'],
    'the deprecated pair, without endpoints',
  );
});

// Each client words its failures its own way, but both name every endpoint and the cause.
const refused = {
  gateway: /no etcd endpoint could be reached \(http:\/\/127\.0\.0\.1:1: Connection refused.*; http:\/\/127\.0\.0\.1:2: Connection refused/,
  grpc: /^no etcd endpoint could be reached \(http:\/\/127\.0\.0\.1:1, http:\/\/127\.0\.0\.1:2\): connect ECONNREFUSED 127\.0\.0\.1:[12]$/,
};
const badCertificate = {
  gateway: /^TLS with etcd at https:\/\/127\.0\.0\.1:\d+ failed: .*BadCertificate/,
  grpc: /^TLS with etcd at https:\/\/127\.0\.0\.1:\d+ failed: the server sent TLS alert "bad certificate"$/,
};

for (const [via, storeFor] of Object.entries(clients) as [keyof typeof clients, (typeof clients)[keyof typeof clients]][]) {
  test(`${via}: create, update and delete only when the revision still holds; a commit is all or nothing`, async (t) => {
    const etcd = await startEtcd(t);
    const store = await storeFor(etcd.netconf);
    t.teardown(() => store.close());

    t.true(await store.commit([{ key: '/netplug/test/a', create: { n: 1 } }]));
    t.false(await store.commit([{ key: '/netplug/test/a', create: { n: 2 } }]), 'create fails on an existing key');
    const a = await store.get<{ n: number }>('/netplug/test/a');
    t.deepEqual(a?.value, { n: 1 });
    t.true(await store.commit([{ key: '/netplug/test/a', update: { n: 2 }, revision: a?.revision ?? '' }]));
    t.false(await store.commit([{ key: '/netplug/test/a', update: { n: 3 }, revision: a?.revision ?? '' }]), 'a stale revision fails');

    const current = await store.get<{ n: number }>('/netplug/test/a');
    const applied = await store.commit([
      { key: '/netplug/test/b', create: { n: 10 } },
      { key: '/netplug/test/a', update: { n: 4 }, revision: a?.revision ?? '' },
    ]);
    t.false(applied);
    t.is(await store.get('/netplug/test/b'), undefined, 'nothing of a failed commit is written');
    t.true(
      await store.commit([
        { key: '/netplug/test/b', create: { n: 10 } },
        { key: '/netplug/test/a', remove: true, revision: current?.revision ?? '' },
      ]),
    );
    t.deepEqual(
      (await store.list('/netplug/test/')).map((e) => [e.key, e.value]),
      [['/netplug/test/b', { n: 10 }]],
    );
    t.deepEqual(await store.listKeys('/netplug/'), ['/netplug/test/b']);
  });

  test(`${via}: an unreachable endpoint is skipped for the next; none reachable names them all`, async (t) => {
    const etcd = await startEtcd(t);
    const store = await storeFor({ etcd_endpoints: `http://127.0.0.1:1,${etcd.endpoints}` });
    t.teardown(() => store.close());
    t.true(await store.commit([{ key: '/netplug/test/x', create: 1 }]));

    const nowhere = await storeFor({ etcd_endpoints: 'http://127.0.0.1:1,http://127.0.0.1:2' });
    const err = await t.throwsAsync(nowhere.get('/x'), { instanceOf: StoreUnavailableError });
    t.regex(err?.message ?? '', refused[via]);
  });

  test(`${via}: mutual TLS: trust bundle with several roots, client certificate required`, async (t) => {
    const etcd = await startEtcd(t, { tls: true });
    const certs = etcd.certs;
    if (!certs) throw new Error('no certificates');
    const store = await storeFor(etcd.netconf);
    t.teardown(() => store.close());
    t.true(await store.commit([{ key: '/netplug/test/tls', create: 'ok' }]), 'server signed by the second root in the bundle');

    const stranger = await storeFor({ ...etcd.netconf, etcd_cert_file: certs.strangerCert, etcd_key_file: certs.strangerKey });
    // A certificate the server refuses is a setting to fix (error 100), not an outage (error 11).
    await t.throwsAsync(stranger.get('/netplug/test/tls'), {
      instanceOf: StoreError,
      message: badCertificate[via],
    });
    const noBundle = await storeFor({ etcd_endpoints: etcd.endpoints, etcd_cert_file: certs.clientCert, etcd_key_file: certs.clientKey });
    await t.throwsAsync(noBundle.get('/netplug/test/tls'), { message: /certificate/ });
  });

  test(`${via}: a list of more than 4 MiB (a large cluster's blocks) is read whole`, async (t) => {
    const etcd = await startEtcd(t);
    const store = await storeFor(etcd.netconf);
    t.teardown(() => store.close());
    // One write per document: etcd takes requests of up to 1.5 MiB.
    const document = { padding: 'x'.repeat(1024 * 1024) };
    for (let i = 0; i < 5; i++) t.true(await store.commit([{ key: `/netplug/test/big/${i}`, create: document }]));
    const listed = await store.list<typeof document>('/netplug/test/big/');
    t.is(listed.length, 5);
    t.true(listed.every((entry) => entry.value.padding.length === 1024 * 1024));
  });

  test(`${via}: many writers on one key converge through compare-and-swap`, async (t) => {
    const etcd = await startEtcd(t);
    const stores = await Promise.all(Array.from({ length: 8 }, () => storeFor(etcd.netconf)));
    t.teardown(() => {
      for (const s of stores) s.close();
    });
    await stores[0]?.commit([{ key: '/netplug/test/counter', create: 0 }]);
    await Promise.all(
      stores.map(async (store) => {
        for (let i = 0; i < 10; i++) {
          for (;;) {
            const current = await store.get<number>('/netplug/test/counter');
            if (
              await store.commit([{ key: '/netplug/test/counter', update: (current?.value ?? 0) + 1, revision: current?.revision ?? '' }])
            )
              break;
          }
        }
      }),
    );
    t.is((await stores[0]?.get<number>('/netplug/test/counter'))?.value, 80, 'no increment lost');
  });
}
