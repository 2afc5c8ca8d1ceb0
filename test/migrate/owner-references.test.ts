// netplugctl migrate owner-references against a real kube-apiserver (no garbage collector here:
// owner-references-gc.test.ts shows what it collects): --check finds every object owned by a
// netplug resource, namespaced or cluster-scoped, built-in or custom, and nothing else; --strip
// records each reference in kube-system before it removes it with a guarded patch, and is
// idempotent; a concurrent change refuses the patch and the record says so; a kill between the
// record and the patches loses nothing; --restore puts the references back with the owners'
// current UIDs, replaces a stale one, leaves out an owner that is gone (exit 1) and clears the
// record. Tests run one after another: each command works on the whole cluster.
import { randomUUID } from 'node:crypto';

import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { stripOwnerReferences, type FoundReference } from '../../ts/migrate/owner-references.ts';
import { runClusterCtlMain } from '../../ts/ctl/cluster-main.ts';
import { tempDir } from '../helpers/cni.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import {
  createConfigMap,
  createPool,
  ctl,
  deletePool,
  type Fixture,
  makeNamespace,
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

/** A test's pool, removed after it with the record. */
async function pool(t: { teardown: (f: () => unknown) => void }, name: string): Promise<string> {
  t.teardown(async () => {
    await deletePool(fixture, name);
    await removeRecord(fixture);
  });
  return createPool(fixture, name);
}

/** The client's typed objects as plain JSON. */
const plain = (value: unknown) => JSON.parse(JSON.stringify(value));
const ownerUids = (configMap: k8s.V1ConfigMap | undefined) =>
  (configMap?.metadata?.ownerReferences ?? []).map((r) => `${r.kind}/${r.name}/${r.uid}`);

test.serial(
  '--check: none, then exactly the objects owned by netplug resources (namespaced, cluster-scoped, custom); exit 1 saying what to run',
  async (t) => {
    const none = await ctl(fixture, '--check');
    t.is(none.code, 0, none.err);
    t.is(none.out, 'No owner references to netplug resources.\n');
    t.is(none.err, '');

    const uid = await pool(t, 'check-pool');
    const namespace = await makeNamespace(fixture, t);
    await createConfigMap(fixture, namespace, 'owned', [poolOwner('check-pool', uid, true)]);
    const other = await createConfigMap(fixture, namespace, 'other-owner', []);
    await createConfigMap(fixture, namespace, 'not-netplug', [
      { apiVersion: 'v1', kind: 'ConfigMap', name: 'other-owner', uid: other.metadata?.uid as string },
    ]);
    const rbac = fixture.config.makeApiClient(k8s.RbacAuthorizationV1Api);
    await rbac.createClusterRole({ body: { metadata: { name: `owned-${process.pid}`, ownerReferences: [poolOwner('check-pool', uid)] } } });
    t.teardown(() => rbac.deleteClusterRole({ name: `owned-${process.pid}` }));
    // A netplug resource owned by another: a block of the pool.
    await fixture.custom.createClusterCustomObject({
      group: 'crd.projectnet.org',
      version: 'v1',
      plural: 'ipamhandles',
      body: {
        apiVersion: 'crd.projectnet.org/v1',
        kind: 'IPAMHandle',
        metadata: { name: 'owned-handle', ownerReferences: [poolOwner('check-pool', uid)] },
        spec: { handleID: 'owned-handle', block: {} },
      },
    });
    t.teardown(() =>
      fixture.custom.deleteClusterCustomObject({ group: 'crd.projectnet.org', version: 'v1', plural: 'ipamhandles', name: 'owned-handle' }),
    );

    const found = await ctl(fixture, '--check');
    t.is(found.code, 1);
    t.is(
      found.err,
      'netplugctl migrate owner-references: 3 owner references to netplug resources: before the upgrade, run netplugctl migrate owner-references --strip\n',
    );
    const rows = found.out.trim().split('\n');
    t.regex(rows[0] ?? '', /^NAMESPACE\s+KIND\s+NAME\s+OWNER\s+OWNER API VERSION\s+OWNER UID$/);
    t.deepEqual(
      rows.slice(1).map((row) => row.trim().split(/\s+/)),
      [
        ['ClusterRole', `owned-${process.pid}`, 'IPPool/check-pool', 'crd.projectnet.org/v1', uid],
        [namespace, 'ConfigMap', 'owned', 'IPPool/check-pool', 'crd.projectnet.org/v1', uid],
        ['IPAMHandle', 'owned-handle', 'IPPool/check-pool', 'crd.projectnet.org/v1', uid],
      ],
    );

    const json = await ctl(fixture, '--check', '-o', 'json');
    t.is(json.code, 1);
    const report = JSON.parse(json.out) as { references: FoundReference[]; unsearched: unknown[]; recorded: unknown[] };
    t.deepEqual(report.unsearched, []);
    t.deepEqual(report.recorded, []);
    t.deepEqual(
      report.references
        .map((r) => [
          r.dependent.apiVersion,
          r.dependent.resource,
          r.dependent.namespace,
          r.dependent.name,
          r.owner.name,
          r.owner.controller,
        ])
        .sort(),
      [
        ['crd.projectnet.org/v1', 'ipamhandles', undefined, 'owned-handle', 'check-pool', undefined],
        ['rbac.authorization.k8s.io/v1', 'clusterroles', undefined, `owned-${process.pid}`, 'check-pool', undefined],
        ['v1', 'configmaps', namespace, 'owned', 'check-pool', true],
      ].sort(),
    );
  },
);

test.serial(
  '--strip records every reference in kube-system first, removes only netplug ones; again: nothing to do; --restore puts them back with the new UIDs',
  async (t) => {
    const oldUid = await pool(t, 'cycle-pool');
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
    const uid = await pool(t, 'race-pool');
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
    const uid = await pool(t, 'kill-pool');
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

test.serial('killed before the patches, the owner recreated: --restore replaces the stale UID, never leaves it dangling', async (t) => {
  const oldUid = await pool(t, 'stale-pool');
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
    const uid = await pool(t, 'gone-pool');
    const keptUid = await pool(t, 'kept-pool');
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

test.serial('an object served in two groups (an Event: v1 and events.k8s.io/v1) is found once and stripped once', async (t) => {
  const uid = await pool(t, 'event-pool');
  const namespace = await makeNamespace(fixture, t);
  await fixture.kube.core.createNamespacedEvent({
    namespace,
    body: {
      metadata: { name: 'owned-event', ownerReferences: [poolOwner('event-pool', uid)] },
      involvedObject: { kind: 'ConfigMap', name: 'any', namespace, apiVersion: 'v1' },
      reason: 'Test',
      message: 'owned by a pool',
    },
  });
  t.teardown(() => fixture.kube.core.deleteNamespacedEvent({ namespace, name: 'owned-event' }));

  const check = await ctl(fixture, '--check', '-o', 'json');
  t.is(check.code, 1);
  t.deepEqual(
    (JSON.parse(check.out) as { references: FoundReference[] }).references.map((r) => [
      r.dependent.apiVersion,
      r.dependent.kind,
      r.dependent.name,
    ]),
    [['v1', 'Event', 'owned-event']],
  );
  const strip = await ctl(fixture, '--strip');
  t.is(strip.code, 0, strip.err);
  const event = await fixture.kube.core.readNamespacedEvent({ namespace, name: 'owned-event' });
  t.deepEqual(event.metadata?.ownerReferences ?? [], []);
  const restore = await ctl(fixture, '--restore');
  t.is(restore.code, 0, restore.err);
  t.deepEqual(
    (await fixture.kube.core.readNamespacedEvent({ namespace, name: 'owned-event' })).metadata?.ownerReferences?.map((r) => r.uid),
    [uid],
  );
});

test('usage mistakes: one line, exit 2; --help; a missing kubeconfig: one line, exit 1', async (t) => {
  const cases: Array<[string[], string]> = [
    [[], 'give one of --check, --strip, --restore'],
    [['--check', '--strip'], '--check and --strip cannot go together: give one'],
    [['--check', '--bogus'], "unknown flag '--bogus'"],
    [['--check', '-o', 'yaml'], '-o "yaml" must be table or json'],
    [['--check', 'extra'], 'unexpected argument "extra"; netplugctl migrate owner-references --help'],
    [['--check', '--kubeconfig'], "Option '--kubeconfig <value>' argument missing"],
  ];
  for (const [args, message] of cases) {
    const run = await ctl(undefined, ...args);
    t.is(run.code, 2, args.join(' '));
    t.is(run.err, `netplugctl migrate owner-references: ${message}\n`, args.join(' '));
    t.is(run.out, '');
  }
  const help = await ctl(undefined, '--help');
  t.is(help.code, 0);
  t.regex(help.out, /^usage: netplugctl migrate owner-references --check\|--strip\|--restore/);

  const missing = await ctl(undefined, '--check', '--kubeconfig', '/nonexistent/kubeconfig');
  t.is(missing.code, 1);
  t.is(missing.err, 'netplugctl migrate owner-references: --kubeconfig /nonexistent/kubeconfig: ENOENT\n');
  const none = await runOwnerReferences(['migrate', 'owner-references', '--check'], { HOME: '/nonexistent' });
  t.is(none.code, 1);
  t.is(none.err, 'netplugctl migrate owner-references: no kubeconfig: give --kubeconfig FILE or set KUBECONFIG\n');
});

/** Through netplugctl's dispatch of cluster commands, as the executable runs it. */
async function runOwnerReferences(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runClusterCtlMain(args, env, {
    out: (text) => (out += text),
    err: (text) => (err += text),
    signal: new AbortController().signal,
  });
  return { code, out, err };
}

test.serial(
  'a group the server cannot list (an aggregated API whose service is missing): reported, exit 1, the rest still searched',
  async (t) => {
    const registration = fixture.config.makeApiClient(k8s.ApiregistrationV1Api);
    const name = 'v1alpha1.unreachable.example.com';
    await registration.createAPIService({
      body: {
        metadata: { name },
        spec: {
          group: 'unreachable.example.com',
          version: 'v1alpha1',
          service: { namespace: 'default', name: 'no-such-service' },
          groupPriorityMinimum: 100,
          versionPriority: 10,
          insecureSkipTLSVerify: true,
        },
      },
    });
    t.teardown(() => registration.deleteAPIService({ name }));
    const uid = await pool(t, 'unsearched-pool');
    const namespace = await makeNamespace(fixture, t);
    await createConfigMap(fixture, namespace, 'owned', [poolOwner('unsearched-pool', uid)]);

    const check = await ctl(fixture, '--check');
    t.is(check.code, 1);
    t.regex(check.out, new RegExp(`${namespace}\\s+ConfigMap\\s+owned\\s+IPPool/unsearched-pool`));
    t.regex(check.out, /^not searched: unreachable\.example\.com\/v1alpha1: .+$/m);
    const strip = await ctl(fixture, '--strip');
    t.is(strip.code, 1);
    t.regex(
      strip.err,
      /^netplugctl migrate owner-references: could not list unreachable\.example\.com\/v1alpha1 \(.+\): references there are unknown\n$/,
    );
    t.deepEqual(ownerUids(await readConfigMap(fixture, namespace, 'owned')), [], 'what could be found was stripped');
    t.is((await ctl(fixture, '--restore')).code, 0);
  },
);
