// netplugctl migrate owner-references --check against a real kube-apiserver: every object owned
// by a netplug resource, namespaced or cluster-scoped, built-in or custom, and nothing else; an
// object served in two groups once; a group that cannot be listed reported (exit 1); usage
// mistakes in one line. Tests run one after another: each command works on the whole cluster.
import { writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';

import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { runClusterCtlMain } from '../../ts/cli/cluster-commands.ts';
import type { FoundReference } from '../../ts/migrate/owner-references.ts';
import { tempDir } from '../helpers/cni.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import {
  createConfigMap,
  ctl,
  type Fixture,
  makeNamespace,
  ownerUids,
  pool,
  poolOwner,
  readConfigMap,
  startFixture,
} from './owner-references-fixtures.ts';

const shared = sharedTeardowns(test);
let fixture: Fixture;

test.before(async () => {
  fixture = await startFixture(shared, tempDir(shared, 'owner-references'));
});

test.serial(
  '--check: none, then exactly the objects owned by netplug resources (namespaced, cluster-scoped, custom); exit 1 saying what to run',
  async (t) => {
    const none = await ctl(fixture, '--check');
    t.is(none.code, 0, none.err);
    t.is(none.out, 'No owner references to netplug resources.\n');
    t.is(none.err, '');

    const uid = await pool(fixture, t, 'check-pool');
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

test.serial('an object served in two groups (an Event: v1 and events.k8s.io/v1) is found once and stripped once', async (t) => {
  const uid = await pool(fixture, t, 'event-pool');
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
    const uid = await pool(fixture, t, 'unsearched-pool');
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

test('usage mistakes: one line, exit 2; --help; a missing kubeconfig or an API server that does not answer: one line, exit 1', async (t) => {
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

  // An API server that does not answer: a port nothing listens on any more.
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  const kubeconfig = join(tempDir(t, 'owner-references-unreachable'), 'kubeconfig');
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: `https://127.0.0.1:${port}` } }],
      users: [{ name: 'u', user: { token: 'x' } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'c',
    }),
  );
  const unreachable = await ctl(undefined, '--strip', '--kubeconfig', kubeconfig);
  t.is(unreachable.code, 1);
  t.is(unreachable.err, `netplugctl migrate owner-references: cannot reach the API server https://127.0.0.1:${port}: ECONNREFUSED\n`);
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
