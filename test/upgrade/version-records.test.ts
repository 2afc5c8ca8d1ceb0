// The rollback step that removes every node's recorded release when going back to a release whose
// agents record none: when the plan has it (pure), what a record that cannot be removed reports
// (fake datastores), and the removal on a real etcd, after which netplugctl version lists no
// release for any node and the next upgrade's first agent leaves the cluster's version alone. On
// the Kubernetes datastore, as part of a whole rollback: tool-apply.test.ts.
import test from 'ava';

import { ensureClusterInfo } from '../../ts/ipam/cluster-info.ts';
import { keys } from '../../ts/model/keys.ts';
import { recordVersion } from '../../ts/node/startup/record-version.ts';
import { openStore } from '../../ts/store/open.ts';
import { type Entry, type Store, StoreError } from '../../ts/store/store.ts';
import type { Install } from '../../ts/upgrade/detect.ts';
import type { UpgradeKube } from '../../ts/upgrade/kube.ts';
import { stepsFor, type StepInputs } from '../../ts/upgrade/steps.ts';
import { recordsNodeVersion, removeRecordsFromStore, removeVersionRecords } from '../../ts/upgrade/version-records.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctlOk } from '../helpers/ipam.ts';

const inputs = (
  method: Install['method'],
  datastore: Install['datastore'],
  from: string | undefined,
  target = NETPLUG_VERSION,
): StepInputs => ({
  install: {
    method,
    namespace: method === 'manifest' ? 'kube-system' : 'netplug-system',
    datastore,
    ipam: 'netplug-ipam',
    usePodCidr: false,
    networking: 'netplug',
    upgradeIpam: false,
    nodes: [],
    imageVersions: from ? [from] : [],
  },
  from,
  target,
  objects: [],
  crds: [],
  storageChanges: [],
  legacyObjects: [],
  ownerReferences: 0,
  helm: method === 'helm' ? { release: 'netplug', namespace: 'netplug-operator', chart: 'c.tgz', version: '3.31.0' } : undefined,
});

test('which releases record their version: from v3.31.0 on', (t) => {
  t.false(recordsNodeVersion('v3.30.0'));
  t.false(recordsNodeVersion('v3.15.2'));
  t.false(recordsNodeVersion(undefined));
  t.false(recordsNodeVersion('unknown'));
  t.true(recordsNodeVersion('v3.31.0'));
  t.true(recordsNodeVersion('3.31.4'));
  t.true(recordsNodeVersion('v3.32.0'));
});

test('from a release that records no version, every procedure on either datastore ends with the step that rollback undoes by removing the records', (t) => {
  for (const method of ['manifest', 'operator', 'helm'] as const)
    for (const datastore of ['kubernetes', 'etcdv3'] as const) {
      const steps = stepsFor(inputs(method, datastore, 'v3.30.0'));
      const step = steps.at(-1);
      t.is(step?.id, 'node-version-records', `${method} ${datastore}`);
      t.is(step?.rollback, 'remove-version-records');
      t.regex(step?.title ?? '', /v3\.30\.0 records none/);
      t.regex(step?.why ?? '', /^once v3\.30\.0 runs on every node again, rollback removes every node's record/);
      t.regex(
        `${step?.operations.join()} ${step?.why}`,
        datastore === 'kubernetes'
          ? /^LIST Nodes \(annotation projectnet\.org\/netplug-version\) .*PATCH Node <name> \(merge: annotation projectnet\.org\/netplug-version null\)/
          : /^LIST \/netplug\/resources\/v3\/projectnet\.org\/nodes\/ \(etcd; status\.netplugVersion\) .*PUT \/netplug\/resources\/v3\/projectnet\.org\/nodes\/<name> /,
      );
    }
  // Not knowing the release, the records are removed all the same (nothing is lost: an agent that records writes its own again).
  t.true(stepsFor(inputs('manifest', 'kubernetes', undefined)).some((s) => s.id === 'node-version-records'));
});

test('between releases that both record, no such step: the agents rewrite their records as they start', (t) => {
  for (const method of ['manifest', 'operator', 'helm'] as const)
    t.false(
      stepsFor(inputs(method, 'etcdv3', 'v3.31.0', 'v3.32.0')).some((s) => s.id === 'node-version-records'),
      method,
    );
});

const recorded = (name: string, version?: string): Entry<unknown> => ({
  key: keys.node(name),
  revision: '1',
  value: { kind: 'Node', metadata: { name }, spec: {}, status: version ? { netplugVersion: version } : {} },
});

test('a record that cannot be removed: the others are, and one line names the node and why', async (t) => {
  const entries = [recorded('node-a', 'v3.31.0'), recorded('node-b', 'v3.31.0'), recorded('node-c')];
  const written: string[] = [];
  const store = {
    description: 'etcd at http://etcd.test:2379',
    list: async () => entries,
    get: async (key: string) => entries.find((e) => e.key === key),
    commit: async (writes: { key: string; update: { status: object } }[]) => {
      const write = writes[0];
      if (write?.key === keys.node('node-b')) throw new StoreError('etcd at http://etcd.test:2379: permission denied\n    at commit');
      written.push(`${write?.key} ${JSON.stringify(write?.update.status)}`);
      return true;
    },
  } as unknown as Store;
  const err = await t.throwsAsync(removeRecordsFromStore(store));
  t.is(
    err?.message,
    'cannot remove the release recorded on node node-b (etcd at http://etcd.test:2379: permission denied); removed on node-a: run netplugctl upgrade rollback again once it can be',
  );
  t.deepEqual(written, [`${keys.node('node-a')} {}`]);

  const kube = {
    list: async () =>
      ['node-a', 'node-b', 'node-c'].map((name) => ({ metadata: { name, annotations: { 'projectnet.org/netplug-version': 'v3.31.0' } } })),
    mergePatch: async (ref: { name: string }) => {
      if (ref.name !== 'node-a') throw new Error(`PATCH /api/v1/nodes/${ref.name}: nodes "${ref.name}" is forbidden`);
      return {};
    },
  } as unknown as UpgradeKube;
  const denied = await t.throwsAsync(removeVersionRecords(kube, { datastore_type: 'kubernetes' }));
  t.is(
    denied?.message,
    'cannot remove the release recorded on node node-b (PATCH /api/v1/nodes/node-b: nodes "node-b" is forbidden), node node-c (PATCH /api/v1/nodes/node-c: nodes "node-c" is forbidden); removed on node-a: run netplugctl upgrade rollback again once it can be',
  );
});

test('on etcd: the records removed (the rest of each Node kept), netplugctl version lists none, and the next upgrade waits for every node', async (t) => {
  const etcd = await startEtcd(t);
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  ctlOk(t, etcd, 'node', 'create', 'node-a', '--label', 'zone=a');
  t.is(await recordVersion('etcdv3', store, undefined, 'node-a', 'v3.31.0'), 'recorded');
  t.is(await recordVersion('etcdv3', store, undefined, 'node-b', 'v3.31.0'), 'recorded');
  t.like(await ensureClusterInfo(store, 'v3.31.0', 'k8s'), { netplugVersion: 'v3.31.0' });

  t.is(
    await removeRecordsFromStore(store),
    `the release recorded on 2 node(s) removed (status.netplugVersion in etcd at ${etcd.endpoints}: node-a, node-b)`,
  );
  t.is(await removeRecordsFromStore(store), 'no node records a release', 'run again, it finds nothing to do');
  t.like((await store.get(keys.node('node-a')))?.value, { metadata: { labels: { zone: 'a' } }, status: {} });
  // v3.30.0's agents write their own release, whatever the nodes recorded.
  await ensureClusterInfo(store, 'v3.30.0', 'k8s');
  t.regex(
    ctlOk(t, etcd, 'version').stdout,
    /Cluster Version: {3}v3\.30\.0\n.*\n\nNODE {4}VERSION\nnode-a {2}\(none recorded\)\nnode-b {2}\(none recorded\)\n$/,
  );

  // Upgrading again: the first new agent does not take the cluster to its release while node-b runs v3.30.0.
  await recordVersion('etcdv3', store, undefined, 'node-a', 'v3.31.0');
  t.like(await ensureClusterInfo(store, 'v3.31.0', 'k8s'), { netplugVersion: 'v3.30.0' });
});
