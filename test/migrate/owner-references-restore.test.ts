// netplugctl migrate owner-references --restore against a real kube-apiserver: a stale UID left on
// an object (a kill before the patches) is replaced, never left dangling; an owner that no longer
// exists, or whose kind is not served, is reported (exit 1), its reference left out and kept in the
// record, and restored once the owner is back. Tests run one after another: each command works on
// the whole cluster.
import { randomUUID } from 'node:crypto';

import test from 'ava';

import { stripOwnerReferences } from '../../ts/migrate/owner-references.ts';
import { tempDir } from '../helpers/cni.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import {
  createConfigMap,
  createPool,
  ctl,
  deletePool,
  type Fixture,
  makeNamespace,
  ownerUids,
  plain,
  pool,
  poolOwner,
  readConfigMap,
  readRecordData,
  recreatePool,
  removeRecord,
  startFixture,
} from './owner-references-fixtures.ts';

const shared = sharedTeardowns(test);
let fixture: Fixture;

test.before(async () => {
  fixture = await startFixture(shared, tempDir(shared, 'owner-references'));
});

test.serial('killed before the patches, the owner recreated: --restore replaces the stale UID, never leaves it dangling', async (t) => {
  const oldUid = await pool(fixture, t, 'stale-pool');
  const namespace = await makeNamespace(fixture, t);
  await createConfigMap(fixture, namespace, 'stale', [poolOwner('stale-pool', oldUid, true)]);
  await t.throwsAsync(stripOwnerReferences(fixture.config, { beforePatches: () => Promise.reject(new Error('killed')) }));

  const newUid = await recreatePool(fixture, 'stale-pool');
  const restore = await ctl(fixture, '--restore');
  t.is(restore.code, 0, restore.err);
  t.regex(restore.out, new RegExp(`uid ${newUid} \\(was ${oldUid}\\), replaced\n`));
  const stale = await readConfigMap(fixture, namespace, 'stale');
  t.deepEqual(plain(stale?.metadata?.ownerReferences), [
    { apiVersion: 'crd.projectnet.org/v1', kind: 'IPPool', name: 'stale-pool', uid: newUid, controller: true },
  ]);
  t.is(await readRecordData(fixture), undefined);
});

test.serial(
  '--restore with an owner that no longer exists: reported (exit 1), its reference left out and kept in the record; restored once it is back',
  async (t) => {
    const uid = await pool(fixture, t, 'gone-pool');
    const keptUid = await pool(fixture, t, 'kept-pool');
    const namespace = await makeNamespace(fixture, t);
    await createConfigMap(fixture, namespace, 'orphan', [poolOwner('gone-pool', uid)]);
    await createConfigMap(fixture, namespace, 'kept', [poolOwner('kept-pool', keptUid)]);
    t.is((await ctl(fixture, '--strip')).code, 0);
    await deletePool(fixture, 'gone-pool');

    const restore = await ctl(fixture, '--restore');
    t.is(restore.code, 1);
    t.is(
      restore.err,
      'netplugctl migrate owner-references: references left out, their owners are gone: IPPool gone-pool (crd.projectnet.org/v1) no longer exists\n',
    );
    t.regex(
      restore.out,
      new RegExp(
        `not restored: ConfigMap ${namespace}/orphan: IPPool gone-pool \\(crd.projectnet.org/v1\\) no longer exists \\(kept in ConfigMap kube-system/netplug-owner-references, key [-.a-z0-9]+\\)\n`,
      ),
    );
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'orphan')), [], 'no dangling reference');
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'kept')), [`IPPool/kept-pool/${keptUid}`]);
    t.deepEqual(
      Object.values((await readRecordData(fixture)) ?? {}).map((e) => e.owner.uid),
      [uid],
    );

    const newUid = await createPool(fixture, 'gone-pool');
    const again = await ctl(fixture, '--restore');
    t.is(again.code, 0, again.err);
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'orphan')), [`IPPool/gone-pool/${newUid}`]);
    t.is(await readRecordData(fixture), undefined);
  },
);

test.serial(
  'a reference in the v3 group (projectnet.org) is found and stripped; where that group is not served, --restore says so and keeps it',
  async (t) => {
    t.teardown(() => removeRecord(fixture));
    const namespace = await makeNamespace(fixture, t);
    const v3Owner = { apiVersion: 'projectnet.org/v3', kind: 'IPPool', name: 'v3-pool', uid: randomUUID() };
    await createConfigMap(fixture, namespace, 'v3-owned', [v3Owner]);

    const strip = await ctl(fixture, '--strip');
    t.is(strip.code, 0, strip.err);
    t.regex(
      strip.out,
      new RegExp(`stripped ConfigMap ${namespace}/v3-owned: owner IPPool v3-pool \\(projectnet.org/v3\\) uid ${v3Owner.uid}`),
    );
    const restore = await ctl(fixture, '--restore');
    t.is(restore.code, 1);
    t.is(
      restore.err,
      'netplugctl migrate owner-references: references left out, their owners are gone: IPPool v3-pool (projectnet.org/v3): no IPPool is served in projectnet.org/v3\n',
    );
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'v3-owned')), []);
    t.deepEqual(
      Object.values((await readRecordData(fixture)) ?? {}).map((e) => e.owner.uid),
      [v3Owner.uid],
    );
  },
);
