// The datastore lock's in-flight gap, closed: an ADD that read ClusterInformation unlocked just
// before `netplugctl datastore migrate lock` cannot commit its allocation after the lock (and so
// after an export that missed it). Made to happen every time: the plugin's ADD runs in-process
// (cmdAdd, with a real network namespace) on a Store that, before the allocation's first commit,
// runs the real lock and export through a second connection to the same real datastore; the
// wrapper only interposes. On etcd the commit's transaction compares ClusterInformation's
// revision; on the Kubernetes datastore the commit reads it first (best effort, no transactions).
import type { ExecutionContext } from 'ava';
import test from 'ava';

import { parseEnvironment } from '../../ts/cni/environment.ts';
import { ErrorCode } from '../../ts/cni/errors.ts';
import { parseNetconf } from '../../ts/config/netconf.ts';
import { createPool } from '../../ts/ctl/pools.ts';
import { CLUSTER_INFO_KEY, datastoreLocked } from '../../ts/model/cluster-information.ts';
import { ensureClusterInfo, setDatastoreReady } from '../../ts/ipam/cluster-info.ts';
import { keys } from '../../ts/model/keys.ts';
import { checkedBlock } from '../../ts/model/checked-documents.ts';
import { Logger } from '../../ts/log/logger.ts';
import type { DatastoreExport } from '../../ts/migrate/datastore-document.ts';
import { exportDatastore } from '../../ts/migrate/datastore-export.ts';
import { lockDatastore, unlockDatastore } from '../../ts/migrate/datastore-lock.ts';
import { cmdAdd } from '../../ts/plugin/add.ts';
import { createContext } from '../../ts/plugin/context.ts';
import { cmdDel } from '../../ts/plugin/del.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { etcdKeys, ipamNetconf } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';
import { installCrds, removeIpamLockFileAfter, startKube } from '../helpers/kube.ts';

const LOCKED =
  /^the datastore is locked for a migration \(ClusterInformation "default" has datastoreReady false\).*datastore migrate unlock$/;

/** `store`, but before the allocation's first commit `meanwhile` runs (on another connection); counts the commits. */
function interposed(store: Store, meanwhile: () => Promise<unknown>): { store: Store; commits: () => number } {
  let commits = 0;
  const wrapped = new Proxy(store, {
    get(target, property) {
      if (property === 'commitElseRead') {
        return async (...args: Parameters<Store['commitElseRead']>) => {
          if (commits++ === 0) await meanwhile();
          return target.commitElseRead(...args);
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: wrapped, commits: () => commits };
}

/** The plugin's ADD (on `store`, or another) and DEL of one container outside Kubernetes, in-process; stores are the caller's to close. */
function plugin(t: ExecutionContext, netconf: object, store: Store) {
  const id = containerId();
  const netns = createNetns(t, 'lockrace').path;
  const context = (command: 'ADD' | 'DEL', on: Store) => {
    const env = parseEnvironment(command, { CNI_CONTAINERID: id, CNI_NETNS: netns, CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' });
    const log = new Logger('netplug', (line) => t.log(line.trimEnd()), process.pid);
    return createContext(env, parseNetconf(Buffer.from(JSON.stringify(netconf))), log, { store: Promise.resolve(on) });
  };
  return {
    add: (on: Store = store) => cmdAdd(context('ADD', on)),
    del: () => cmdDel(context('DEL', store)),
  };
}

/** What the datastore holds of allocations: addresses in blocks, handles, workload endpoints, pending requests. */
async function allocationState(store: Store) {
  const blocks = [...(await store.list(keys.blocks(4))), ...(await store.list(keys.blocks(6)))].map(checkedBlock);
  return {
    addresses: blocks.reduce((n, b) => n + b.value.allocations.filter((a) => a !== null).length, 0),
    handles: (await store.listKeys(keys.handles)).sort(),
    endpoints: (await store.listKeys(keys.workloadEndpoints)).sort(),
    pending: (await store.listKeys('/netplug/ipam/v2/pending/')).length,
  };
}

const addressesIn = (data: DatastoreExport) =>
  data.sections.blocks.reduce((n, b) => n + (b.value['allocations'] as (number | null)[]).filter((a) => a !== null).length, 0);

test("etcd: a lock (and an export) landing between an ADD's read and its commit fails the commit; the ADD gets 11 and allocates nothing", async (t) => {
  t.timeout(2 * 60_000);
  const etcd = await startEtcd(t);
  const [mine, other] = await Promise.all([openStore(etcd.netconf), openStore(etcd.netconf)]);
  t.teardown(() => {
    for (const s of [mine, other]) s.close();
  });
  await createPool(other, 'race', { cidr: '10.191.0.0/16', 'block-size': '28' });
  await ensureClusterInfo(other, '3.31.0', 'k8s');
  const netconf = ipamNetconf(etcd, { name: 'lockrace', node: 'race-a' });

  // A running container: the node has a block, and the copy must hold its address.
  const running = plugin(t, netconf, mine);
  await running.add();
  const before = await allocationState(other);
  t.is(before.addresses, 1);

  const raced = plugin(t, netconf, mine);
  let exported: DatastoreExport | undefined;
  const { store, commits } = interposed(mine, async () => {
    t.regex(await lockDatastore(other), /locked: ClusterInformation "default" datastoreReady false/);
    exported = await exportDatastore(other, { allowUnlocked: false });
  });
  const error = await t.throwsAsync(raced.add(store), { message: LOCKED });
  t.is((error as unknown as { code: number }).code, ErrorCode.TryAgainLater);
  t.is(commits(), 1, 'the commit that followed the lock failed, and the retry saw the lock instead of committing again');

  // Nothing was allocated: the datastore is as the export copied it, which holds the one running address.
  t.deepEqual(await allocationState(other), before);
  t.is(addressesIn(exported as DatastoreExport), 1);
  t.deepEqual(
    (exported as DatastoreExport).sections.handles.map((h) => h.key),
    before.handles,
  );
  t.deepEqual(await etcdKeys(t, etcd, keys.handles), before.handles, 'seen by an independent etcd client too');
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/pending/'), [], 'the pending request the failed commit left was taken back');

  // Unlocked (a migration called off), the runtime's retry of the same ADD is networked.
  t.regex(await unlockDatastore(other), /unlocked/);
  const result = await raced.add();
  t.is(result.ips?.length, 1);
  t.is((await allocationState(other)).addresses, 2);
  await Promise.all([raced.del(), running.del()]);
  t.like(await allocationState(other), { addresses: 0, handles: [], endpoints: [], pending: 0 });
});

test('etcd: ClusterInformation missing when the ADD read it, created locked before its commit: 11, nothing allocated', async (t) => {
  t.timeout(2 * 60_000);
  const etcd = await startEtcd(t);
  const [mine, other] = await Promise.all([openStore(etcd.netconf), openStore(etcd.netconf)]);
  t.teardown(() => {
    for (const s of [mine, other]) s.close();
  });
  await createPool(other, 'race', { cidr: '10.192.0.0/16' });
  t.is(await other.get(CLUSTER_INFO_KEY), undefined);

  const raced = plugin(t, ipamNetconf(etcd, { name: 'lockrace', node: 'race-a' }), mine);
  const { store, commits } = interposed(mine, () => setDatastoreReady(other, false));
  await t.throwsAsync(raced.add(store), { message: LOCKED });
  t.is(commits(), 1);
  t.true(datastoreLocked(await other.get(CLUSTER_INFO_KEY)));
  t.like(await allocationState(other), { addresses: 0, handles: [], endpoints: [], pending: 0 });
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/'), [], 'no block, affinity, handle or pending request');
});

test('etcd: ClusterInformation changed but not locked before the commit (a node agent rolled out): one more round, the ADD is networked', async (t) => {
  t.timeout(2 * 60_000);
  const etcd = await startEtcd(t);
  const [mine, other] = await Promise.all([openStore(etcd.netconf), openStore(etcd.netconf)]);
  t.teardown(() => {
    for (const s of [mine, other]) s.close();
  });
  await createPool(other, 'race', { cidr: '10.193.0.0/16' });
  await ensureClusterInfo(other, '3.30.2', 'k8s');

  const raced = plugin(t, ipamNetconf(etcd, { name: 'lockrace', node: 'race-a' }), mine);
  const { store, commits } = interposed(mine, () => ensureClusterInfo(other, '3.31.0', 'k8s'));
  const result = await raced.add(store);
  t.is(result.ips?.length, 1);
  t.is(commits(), 2, 'the first commit failed on the changed ClusterInformation; the second, on what it read then, went through');
  t.like(await allocationState(other), { addresses: 1, pending: 0 });
  await raced.del();
  t.like(await allocationState(other), { addresses: 0, handles: [], endpoints: [] });
});

test('condition-only writes on etcd and on the Kubernetes datastore: a commit fails, writing nothing, when the key changed or appeared', async (t) => {
  t.timeout(3 * 60_000);
  const [etcd, kube] = await Promise.all([startEtcd(t), startKube(t)]);
  await installCrds(kube);
  const stores = await Promise.all([
    openStore(etcd.netconf),
    openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } }),
  ]);
  t.teardown(() => {
    for (const s of stores) s.close();
  });
  for (const store of stores) {
    const handle = (n: number) => ({ handleID: `net.c${n}`, block: { '10.9.0.0/26': n }, deleted: false });
    const written = (n: number) => ({ key: keys.handle(`net.c${n}`), create: handle(n) });
    // Absent: holds while ClusterInformation does not exist.
    t.true(await store.commit([{ key: CLUSTER_INFO_KEY, absent: true }, written(1)]), store.description);
    await setDatastoreReady(store, false);
    const read = await store.get(CLUSTER_INFO_KEY);
    t.false(await store.commit([{ key: CLUSTER_INFO_KEY, absent: true }, written(2)]), store.description);
    // Unchanged: holds at the revision read, fails once it changed.
    t.true(await store.commit([{ key: CLUSTER_INFO_KEY, unchanged: read?.revision ?? '' }, written(3)]), store.description);
    await setDatastoreReady(store, true);
    t.false(await store.commit([written(4), { key: CLUSTER_INFO_KEY, unchanged: read?.revision ?? '' }]), store.description);
    t.deepEqual(
      (await store.listKeys(keys.handles)).sort(),
      [keys.handle('net.c1'), keys.handle('net.c3')],
      `${store.description}: the failed commits wrote nothing (the Kubernetes store undid the create before the condition)`,
    );
    t.true((await store.get(CLUSTER_INFO_KEY))?.value !== undefined);
    for (const key of await store.listKeys(keys.handles)) {
      const entry = await store.get(key);
      if (entry) t.true(await store.commit([{ key, remove: true, revision: entry.revision }]));
    }
  }
});

test("Kubernetes datastore: a lock landing between an ADD's read and its commit is seen by the commit's check; 11, nothing allocated", async (t) => {
  t.timeout(3 * 60_000);
  removeIpamLockFileAfter(t);
  const kube = await startKube(t);
  await installCrds(kube);
  const settings = { datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } };
  const [mine, other] = await Promise.all([openStore(settings), openStore(settings)]);
  t.teardown(() => {
    for (const s of [mine, other]) s.close();
  });
  await kube.core.createNode({ body: { metadata: { name: 'race-k' } } });
  await createPool(other, 'race', { cidr: '10.194.0.0/16', 'block-size': '28' });
  await ensureClusterInfo(other, '3.31.0', 'k8s,kdd');
  const netconf = {
    cniVersion: '1.1.0',
    name: 'lockrace',
    type: 'netplug',
    nodename: 'race-k',
    ...settings,
    ipam: { type: 'netplug-ipam' },
  };

  const raced = plugin(t, netconf, mine);
  const { store, commits } = interposed(mine, () => lockDatastore(other));
  await t.throwsAsync(raced.add(store), { message: LOCKED });
  t.is(commits(), 1);
  t.like(await allocationState(other), { addresses: 0, handles: [], endpoints: [], pending: 0 });
  t.deepEqual(await other.listKeys(keys.allAffinities), [], 'no block claimed for the node');

  await unlockDatastore(other);
  t.is((await raced.add()).ips?.length, 1);
  await raced.del();
  t.like(await allocationState(other), { addresses: 0, handles: [], endpoints: [] });
});
