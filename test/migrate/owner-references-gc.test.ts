// The specification's "Owner references" steps against the real garbage collector
// (kube-controller-manager, garbagecollector alone, from scripts/kube-binaries.sh) and a real
// kube-apiserver: a ConfigMap owned by an IPPool whose UID changes (deleted and created again, as
// an import or a restore does) is collected without the steps, and survives with them, owned by
// the pool's new UID, by the built netplugctl run as the README says. No timing is assumed: a control object owned by the pool's old UID is
// created afterwards, and once the collector has taken it the survivor is checked.
import { randomUUID } from 'node:crypto';

import test from 'ava';

import { tempDir } from '../helpers/cni.ts';
import { eventually } from '../helpers/eventually.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import {
  createConfigMap,
  createPool,
  netplugctl,
  deletePool,
  type Fixture,
  makeNamespace,
  poolOwner,
  readConfigMap,
  readRecordData,
  recreatePool,
  removeRecord,
  startFixture,
  startGarbageCollector,
} from './owner-references-fixtures.ts';

const shared = sharedTeardowns(test);
let fixture: Fixture;
let collectorLog: () => string;

/** Until the collector has deleted the ConfigMap (up to 2 minutes; it usually takes well under a second). */
const collected = (namespace: string, name: string) =>
  eventually(
    `the garbage collector to delete ConfigMap ${namespace}/${name}`,
    async () => !(await readConfigMap(fixture, namespace, name)),
    {
      timeoutMs: 120_000,
      context: () => collectorLog(),
    },
  );

test.before(async () => {
  fixture = await startFixture(shared, tempDir(shared, 'owner-references-gc'));
  // After the CRDs are served: the collector finds resources by discovery when it starts.
  ({ log: collectorLog } = await startGarbageCollector(fixture, shared));
  // Working once it collects an object whose owner does not exist.
  const namespace = await makeNamespace(fixture, shared);
  await createConfigMap(fixture, namespace, 'probe', [poolOwner('never-created', randomUUID())]);
  await collected(namespace, 'probe');
});

test.serial('without the steps: the pool recreated with a new UID, the ConfigMap it owned is collected', async (t) => {
  t.teardown(() => deletePool(fixture, 'pool-a'));
  const namespace = await makeNamespace(fixture, t);
  const oldUid = await createPool(fixture, 'pool-a');
  await createConfigMap(fixture, namespace, 'owned', [poolOwner('pool-a', oldUid)]);

  const newUid = await recreatePool(fixture, 'pool-a');
  t.not(newUid, oldUid);
  await collected(namespace, 'owned');
  t.is(await readConfigMap(fixture, namespace, 'owned'), undefined);
});

test.serial(
  'with netplugctl migrate owner-references --check, --strip, the pool recreated, --restore: the ConfigMap survives, owned by the new UID',
  async (t) => {
    const admin = { KUBECONFIG: fixture.kube.server.admin.kubeconfig };
    t.teardown(async () => {
      await deletePool(fixture, 'pool-b');
      await removeRecord(fixture);
    });
    const namespace = await makeNamespace(fixture, t);
    const oldUid = await createPool(fixture, 'pool-b');
    await createConfigMap(fixture, namespace, 'owned', [poolOwner('pool-b', oldUid, true)]);

    const before = await netplugctl(admin, 'migrate', 'owner-references', '--check');
    t.is(before.code, 1, before.err);
    t.regex(before.out, new RegExp(`${namespace}\\s+ConfigMap\\s+owned\\s+IPPool/pool-b\\s+crd.projectnet.org/v1\\s+${oldUid}\n`));
    const strip = await netplugctl(admin, 'migrate', 'owner-references', '--strip');
    t.is(strip.code, 0, strip.err);
    const stripped = await netplugctl(admin, 'migrate', 'owner-references', '--check');
    t.is(stripped.code, 0, stripped.err);

    const newUid = await recreatePool(fixture, 'pool-b');
    t.not(newUid, oldUid);
    const restore = await netplugctl(admin, 'migrate', 'owner-references', '--restore');
    t.is(restore.code, 0, restore.err);
    t.is(await readRecordData(fixture), undefined);

    // The control: what the survivor would be had it kept the old UID.
    await createConfigMap(fixture, namespace, 'control', [poolOwner('pool-b', oldUid, true)]);
    await collected(namespace, 'control');
    const survivor = await readConfigMap(fixture, namespace, 'owned');
    t.is(survivor?.data?.['kept'], 'yes');
    t.deepEqual(JSON.parse(JSON.stringify(survivor?.metadata?.ownerReferences)), [
      { apiVersion: 'crd.projectnet.org/v1', kind: 'IPPool', name: 'pool-b', uid: newUid, controller: true },
    ]);

    const after = await netplugctl({}, 'migrate', 'owner-references', '--check', '--kubeconfig', admin.KUBECONFIG);
    t.is(after.code, 1);
    t.regex(after.out, new RegExp(`${namespace}\\s+ConfigMap\\s+owned\\s+IPPool/pool-b\\s+crd.projectnet.org/v1\\s+${newUid}\n`));
  },
);
