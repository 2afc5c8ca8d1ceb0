// netplugctl migrate owner-references --strip against a real kube-apiserver (no garbage collector
// here: owner-references-gc.test.ts shows what it collects): each reference recorded in
// kube-system before any object changes, then removed by a guarded patch, netplug's only;
// idempotent; a concurrent change refuses the patch, keeps the change, and the record says so; a
// kill between the record and the patches loses nothing. Tests run one after another: each
// command works on the whole cluster.
import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { stripOwnerReferences } from '../../ts/migrate/owner-references.ts';
import { tempDir } from '../helpers/cni.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import {
  createConfigMap,
  ctl,
  type Fixture,
  makeNamespace,
  ownerUids,
  plain,
  pool,
  poolOwner,
  readConfigMap,
  readRecordData,
  recreatePool,
  startFixture,
} from './owner-references-fixtures.ts';

const shared = sharedTeardowns(test);
let fixture: Fixture;

test.before(async () => {
  fixture = await startFixture(shared, tempDir(shared, 'owner-references'));
});

test.serial(
  '--strip records every reference in kube-system first, removes only netplug ones; again: nothing to do; --restore puts them back with the new UIDs',
  async (t) => {
    const oldUid = await pool(fixture, t, 'cycle-pool');
    const namespace = await makeNamespace(fixture, t);
    const other = await createConfigMap(fixture, namespace, 'other-owner', []);
    const otherOwner = { apiVersion: 'v1', kind: 'ConfigMap', name: 'other-owner', uid: other.metadata?.uid as string };
    await createConfigMap(fixture, namespace, 'one', [poolOwner('cycle-pool', oldUid, true)]);
    await createConfigMap(fixture, namespace, 'mixed', [otherOwner, poolOwner('cycle-pool', oldUid)]);

    const strip = await ctl(fixture, '--strip');
    t.is(strip.code, 0, strip.err);
    t.is(strip.err, '');
    t.true(strip.out.endsWith('2 recorded in ConfigMap kube-system/netplug-owner-references, 2 stripped, 0 not stripped\n'), strip.out);
    t.regex(
      strip.out,
      new RegExp(`stripped ConfigMap ${namespace}/mixed: owner IPPool cycle-pool \\(crd.projectnet.org/v1\\) uid ${oldUid}`),
    );
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'one')), []);
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'mixed')), [`ConfigMap/other-owner/${otherOwner.uid}`]);
    const record = await readRecordData(fixture);
    t.deepEqual(
      Object.values(record ?? {}).map((entry) => [entry.state, entry.owner.uid]),
      [
        ['stripped', oldUid],
        ['stripped', oldUid],
      ],
    );

    const check = await ctl(fixture, '--check');
    t.is(check.code, 0, check.err);
    t.is(
      check.out,
      'No owner references to netplug resources.\n2 recorded in ConfigMap kube-system/netplug-owner-references await a restore: after the upgrade, run netplugctl migrate owner-references --restore\n',
    );

    const again = await ctl(fixture, '--strip');
    t.is(again.code, 0, again.err);
    t.is(again.out, '0 recorded in ConfigMap kube-system/netplug-owner-references, 0 stripped, 0 not stripped\n');
    t.deepEqual(await readRecordData(fixture), record, 'what was recorded before stays');
    const againJson = await ctl(fixture, '--strip', '-o', 'json');
    t.is(againJson.code, 0, againJson.err);
    t.deepEqual(JSON.parse(againJson.out), { recorded: [], stripped: [], failed: [], gone: [], unsearched: [] });

    const newUid = await recreatePool(fixture, 'cycle-pool');
    t.not(newUid, oldUid);
    const restore = await ctl(fixture, '--restore');
    t.is(restore.code, 0, restore.err);
    t.regex(
      restore.out,
      new RegExp(
        `restored ConfigMap ${namespace}/one: owner IPPool cycle-pool \\(crd.projectnet.org/v1\\) uid ${newUid} \\(was ${oldUid}\\), added`,
      ),
    );
    t.true(restore.out.endsWith('2 restored, 0 not restored\n'), restore.out);
    const one = await readConfigMap(fixture, namespace, 'one');
    t.deepEqual(plain(one?.metadata?.ownerReferences), [
      { apiVersion: 'crd.projectnet.org/v1', kind: 'IPPool', name: 'cycle-pool', uid: newUid, controller: true },
    ]);
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'mixed')), [
      `ConfigMap/other-owner/${otherOwner.uid}`,
      `IPPool/cycle-pool/${newUid}`,
    ]);
    t.is(await readRecordData(fixture), undefined, 'the record is gone once everything was restored');

    const restoreAgain = await ctl(fixture, '--restore');
    t.is(restoreAgain.code, 0, restoreAgain.err);
    t.is(restoreAgain.out, '0 restored, 0 not restored\n');
    const restoreJson = await ctl(fixture, '--restore', '-o', 'json');
    t.is(restoreJson.code, 0, restoreJson.err);
    t.deepEqual(JSON.parse(restoreJson.out), { restored: [], missingOwners: [], goneDependents: [], failed: [], unreadableKeys: [] });
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'mixed')), [
      `ConfigMap/other-owner/${otherOwner.uid}`,
      `IPPool/cycle-pool/${newUid}`,
    ]);
    t.is((await ctl(fixture, '--check')).code, 1, 'the references are back');
  },
);

test.serial(
  'a concurrent change to an object between the record and its patch: the patch is refused, the change kept, the record says so; --strip again finishes',
  async (t) => {
    const uid = await pool(fixture, t, 'race-pool');
    const namespace = await makeNamespace(fixture, t);
    const other = await createConfigMap(fixture, namespace, 'other-owner', []);
    const otherOwner = { apiVersion: 'v1', kind: 'ConfigMap', name: 'other-owner', uid: other.metadata?.uid as string };
    await createConfigMap(fixture, namespace, 'raced', [poolOwner('race-pool', uid)]);

    const result = await stripOwnerReferences(fixture.config, {
      // Someone else adds an owner in front: the pool's reference moves from place 0 to 1.
      beforePatches: async () => {
        await fixture.kube.core.patchNamespacedConfigMap(
          { namespace, name: 'raced', body: [{ op: 'add', path: '/metadata/ownerReferences/0', value: otherOwner }] },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
        );
      },
    });
    t.is(result.stripped.length, 0);
    t.is(result.failed.length, 1);
    t.regex(
      result.failed[0]?.error ?? '',
      new RegExp(`^ConfigMap ${namespace}/raced changed since it was read \\(its owner references moved\\); run --strip again$`),
    );
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'raced')), [
      `ConfigMap/other-owner/${otherOwner.uid}`,
      `IPPool/race-pool/${uid}`,
    ]);
    const [entry] = Object.values((await readRecordData(fixture)) ?? {});
    t.is(entry?.state, 'failed');
    t.is(entry?.message, result.failed[0]?.error);

    const again = await ctl(fixture, '--strip');
    t.is(again.code, 0, again.err);
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'raced')), [`ConfigMap/other-owner/${otherOwner.uid}`]);
    t.deepEqual(
      Object.values((await readRecordData(fixture)) ?? {}).map((e) => e.state),
      ['stripped'],
    );

    const restore = await ctl(fixture, '--restore');
    t.is(restore.code, 0, restore.err);
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'raced')), [
      `ConfigMap/other-owner/${otherOwner.uid}`,
      `IPPool/race-pool/${uid}`,
    ]);
  },
);

test.serial(
  'killed between the record and the patches: every reference is recorded, nothing changed; --strip again finishes',
  async (t) => {
    const uid = await pool(fixture, t, 'kill-pool');
    const namespace = await makeNamespace(fixture, t);
    await createConfigMap(fixture, namespace, 'a', [poolOwner('kill-pool', uid)]);
    await createConfigMap(fixture, namespace, 'b', [poolOwner('kill-pool', uid)]);

    const killed = new Error('killed');
    await t.throwsAsync(stripOwnerReferences(fixture.config, { beforePatches: () => Promise.reject(killed) }), { is: killed });
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'a')), [`IPPool/kill-pool/${uid}`]);
    t.deepEqual(
      Object.values((await readRecordData(fixture)) ?? {}).map((e) => e.state),
      ['recorded', 'recorded'],
    );

    const again = await ctl(fixture, '--strip');
    t.is(again.code, 0, again.err);
    t.true(again.out.endsWith(', 2 stripped, 0 not stripped\n'), again.out);
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'a')), []);
    t.deepEqual(
      Object.values((await readRecordData(fixture)) ?? {}).map((e) => e.state),
      ['stripped', 'stripped'],
    );
    t.is((await ctl(fixture, '--restore')).code, 0);
  },
);
