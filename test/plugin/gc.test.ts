// GC is this node's: it releases only this node's addresses of attachments no longer valid, never
// writes another node's handles (not even one caught mid-ADD, written before its addresses), and
// without a list of valid attachments it refuses (error 7) rather than release everything. On a
// real etcd and on the Kubernetes datastore (a real kube-apiserver), with two nodes' allocations.
import { spawnSync } from 'node:child_process';

import test, { type ExecutionContext } from 'ava';
import type * as k8s from '@kubernetes/client-node';
import { Etcd3 } from 'etcd3';

import { invoke } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { ctlOk, ipamNetconf, NETPLUG_IPAM, NETPLUGCTL, totalAllocated } from '../helpers/ipam.ts';
import { containerId } from '../helpers/kernel.ts';
import { DATASTORE_RULES, installCrds, PLUGIN_RULES, startKube, removeIpamLockFileAfter } from '../helpers/kube.ts';

const HANDLES = '/netplug/ipam/v2/handle/';

/** An attachment's addresses from netplug-ipam's executable (no interface: GC is about the datastore). */
function allocate(t: ExecutionContext, netconf: Record<string, unknown>): string {
  const id = containerId();
  const add = invoke({ executable: NETPLUG_IPAM, command: 'ADD', containerId: id, netns: '/run/netns/netplug-ipam-only', netconf });
  if (add.status !== 0) t.fail(`ADD exited ${add.status}: ${add.stdout}${add.stderr}`);
  return id;
}

const gc = (netconf: Record<string, unknown>, valid?: string[], field = 'cni.dev/valid-attachments') =>
  invoke({
    command: 'GC',
    netconf: { ...netconf, ...(valid ? { [field]: valid.map((id) => ({ containerID: id, ifname: 'eth0' })) } : {}) },
  });

function etcdClient(t: ExecutionContext, etcd: EtcdServer): Etcd3 {
  const client = new Etcd3({ hosts: etcd.endpoints });
  t.teardown(() => client.close());
  return client;
}

/** Every handle key with its modification revision: a rewrite changes it. */
async function handleRevisions(client: Etcd3): Promise<Record<string, string>> {
  const { kvs } = await client.getAll().prefix(HANDLES).exec();
  return Object.fromEntries(kvs.map((kv) => [kv.key.toString(), String(kv.mod_revision)]));
}

test('etcd: GC releases this node’s stale addresses only and never writes another node’s handles', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.93.0.0/16');
  const client = etcdClient(t, etcd);
  const onA = ipamNetconf(etcd, { node: 'node-a', name: 'gcnet' });
  const onB = ipamNetconf(etcd, { node: 'node-b', name: 'gcnet' });
  const [kept, stale] = [allocate(t, onA), allocate(t, onA)];
  const [b1, b2] = [allocate(t, onB), allocate(t, onB)];
  // node-b caught mid-ADD on a datastore without transactions: its handle written, its address not yet.
  const b1Handle = JSON.parse((await client.get(`${HANDLES}gcnet.${b1}`).string()) ?? '{}');
  const midAdd = `gcnet.${containerId()}`;
  await client.put(`${HANDLES}${midAdd}`).value(JSON.stringify({ handleID: midAdd, block: b1Handle.block, deleted: false }));
  const before = await handleRevisions(client);

  const run = gc(onA, [kept]);
  t.is(run.status, 0, run.stdout);
  const after = await handleRevisions(client);
  t.false(`${HANDLES}gcnet.${stale}` in after, "node-a's stale attachment is released");
  t.is(after[`${HANDLES}gcnet.${kept}`], before[`${HANDLES}gcnet.${kept}`], 'the valid one is not even rewritten');
  for (const id of [b1, b2]) t.is(after[`${HANDLES}gcnet.${id}`], before[`${HANDLES}gcnet.${id}`], `node-b's ${id} untouched`);
  t.is(after[`${HANDLES}${midAdd}`], before[`${HANDLES}${midAdd}`], "node-b's handle caught mid-ADD untouched");
  t.is(totalAllocated(t, etcd), 3);

  // node-b's own GC, with an empty list (valid: it names no attachment), releases node-b's.
  const onBOwn = gc(onB, []);
  t.is(onBOwn.status, 0, onBOwn.stdout);
  t.is(totalAllocated(t, etcd), 1, "only node-a's valid attachment keeps its address");
});

test('etcd: GC without a list of valid attachments is refused with error 7 and releases nothing', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.94.0.0/16');
  const netconf = ipamNetconf(etcd, { node: 'node-a' });
  allocate(t, netconf);
  for (const executable of [undefined, NETPLUG_IPAM]) {
    const run = invoke({ command: 'GC', netconf, ...(executable ? { executable } : {}) });
    t.is(run.status, 1);
    t.is(run.json?.code, 7, run.stdout);
    t.regex(run.json?.msg ?? '', /"cni\.dev\/valid-attachments"/);
  }
  t.is(totalAllocated(t, etcd), 1, 'nothing released');
  t.is(gc(netconf, [], 'cni.dev/attachments').status, 0, "libcni's cni.dev/attachments is a list too");
  t.is(totalAllocated(t, etcd), 0);
  // libcni (Go) writes an empty list as null.
  allocate(t, netconf);
  const asNull = invoke({ command: 'GC', netconf: { ...netconf, 'cni.dev/valid-attachments': null, 'cni.dev/attachments': null } });
  t.is(asNull.status, 0, asNull.stdout);
  t.is(totalAllocated(t, etcd), 0);
});

test('Kubernetes datastore: GC on one node leaves the other node’s handles as they were', async (t) => {
  removeIpamLockFileAfter(t);
  const kube = await startKube(t);
  await installCrds(kube);
  const kubeconfig = (await kube.identityWith('netplug-cni-gc', [...PLUGIN_RULES, ...DATASTORE_RULES])).kubeconfig;
  for (const name of ['gc-a', 'gc-b']) await kube.core.createNode({ body: { metadata: { name } } });
  const pool = spawnSync(NETPLUGCTL, ['--kubeconfig', kube.server.admin.kubeconfig, 'pool', 'create', 'gc', '--cidr', '10.95.0.0/16'], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin' },
    timeout: 60_000,
  });
  t.is(pool.status, 0, pool.stderr);
  const netconf = (node: string) => ({
    cniVersion: '1.1.0',
    name: 'kddgc',
    type: 'netplug',
    nodename: node,
    datastore_type: 'kubernetes',
    kubernetes: { kubeconfig },
    ipam: { type: 'netplug-ipam' },
  });
  const [kept, stale] = [allocate(t, netconf('gc-a')), allocate(t, netconf('gc-a'))];
  const onB = allocate(t, netconf('gc-b'));
  const custom = kube.custom;
  const handles = async () =>
    Object.fromEntries(
      (
        (await custom.listClusterCustomObject({ group: 'crd.projectnet.org', version: 'v1', plural: 'ipamhandles' })) as {
          items: { metadata: k8s.V1ObjectMeta; spec: { handleID: string } }[];
        }
      ).items.map((h) => [h.spec.handleID, h.metadata.resourceVersion]),
    );
  const before = await handles();
  t.truthy(before[`kddgc.${onB}`]);

  t.is(gc(netconf('gc-a')).json?.code, 7, 'no list: refused');
  const run = gc(netconf('gc-a'), [kept]);
  t.is(run.status, 0, run.stdout);
  const after = await handles();
  t.false(`kddgc.${stale}` in after, "gc-a's stale attachment is released");
  t.is(after[`kddgc.${kept}`], before[`kddgc.${kept}`]);
  t.is(after[`kddgc.${onB}`], before[`kddgc.${onB}`], "gc-b's handle is not rewritten");
});
