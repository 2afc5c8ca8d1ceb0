// netplugctl ipam check on a live cluster: on the Kubernetes datastore (a real kube-apiserver) an
// ADD's commit is several writes, so a check can read a handle before its block holds the address.
// What the check finds there is read again before it is reported: an ADD that finishes meanwhile
// is no problem, a handle whose block stays without its address is. On etcd (a real one) every
// commit is one transaction and the reads one snapshot: what is found is reported at once.
import test, { type ExecutionContext } from 'ava';

import { checkIpam } from '../../ts/ctl/ipam-check.ts';
import { ordinalsOf, releaseOrdinals } from '../../ts/ipam/block.ts';
import { checkedBlock } from '../../ts/model/checked-documents.ts';
import type { Block } from '../../ts/model/ipam-documents.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { runMain } from '../../ts/plugin/main.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';
import { installCrds, startKube } from '../helpers/kube.ts';

const NODE = 'node-check';

/** netplug-ipam's ADD through the core on `datastore`; the handle it made. */
async function add(t: ExecutionContext, datastore: Record<string, unknown>): Promise<string> {
  const container = containerId();
  const netconf = { cniVersion: '1.1.0', name: 'check', type: 'netplug', nodename: NODE, ...datastore, ipam: { type: 'netplug-ipam' } };
  const env = {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: container,
    CNI_NETNS: createNetns(t, 'check').path,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/usr/lib/cni',
  };
  const outcome = await runMain(
    { env, readStdin: () => Buffer.from(JSON.stringify(netconf)), stderr: () => undefined, pid: process.pid },
    'netplug-ipam',
  );
  t.is(outcome.exitCode, 0, outcome.stdout);
  return `check.${container}`;
}

/** The node's one block, as it is now. */
async function theBlock(store: Store) {
  const [block] = (await store.list(keys.blocks(4))).map(checkedBlock);
  if (!block) throw new Error('no block');
  return block;
}

/** Writes `change` of the block as it is now. */
async function changeBlock(t: ExecutionContext, store: Store, change: (block: Block) => void): Promise<void> {
  const block = await theBlock(store);
  const value = structuredClone(block.value);
  change(value);
  t.true(await store.commit([{ key: block.key, update: value, revision: block.revision }]));
}

const kinds = (text: string) =>
  (JSON.parse(text) as { problems: { kind: string; subject: string }[] }).problems.map((p) => [p.kind, p.subject]);

test('on the Kubernetes datastore, a handle whose address reaches its block meanwhile is no problem; one that stays without it is', async (t) => {
  const kube = await startKube(t);
  await installCrds(kube);
  const kubeconfig = kube.server.admin.kubeconfig;
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig } });
  t.teardown(() => store.close());
  await store.commit([{ key: keys.pool('check'), create: poolResource('check', { cidr: '10.78.0.0/16' }, new Date()) }]);
  const handle = await add(t, { datastore_type: 'kubernetes', kubernetes: { kubeconfig } });
  const committed = structuredClone((await theBlock(store)).value);
  // What a check reading between an ADD's handle and its block sees.
  await changeBlock(t, store, (block) => releaseOrdinals(block, ordinalsOf(block, handle)));

  let confirmed = 0;
  const finished = await checkIpam(store, true, {
    gracePeriodSeconds: 0,
    now: new Date(),
    // The ADD's block write lands before the second read.
    confirm: async () => {
      confirmed++;
      await changeBlock(t, store, (block) => Object.assign(block, structuredClone(committed)));
    },
  });
  t.is(confirmed, 1, 'what the first read found was read again');
  t.true(finished.clean, finished.text);

  await changeBlock(t, store, (block) => releaseOrdinals(block, ordinalsOf(block, handle)));
  const stuck = await checkIpam(store, true, { gracePeriodSeconds: 0, now: new Date(), confirm: async () => undefined });
  t.false(stuck.clean);
  t.deepEqual(kinds(stuck.text), [['handle-mismatch', handle]]);
});

test('on etcd, what the check finds is reported without a second read', async (t) => {
  const etcd = await startEtcd(t);
  const store = await openStore(etcd.netconf);
  t.teardown(() => store.close());
  await store.commit([{ key: keys.pool('check'), create: poolResource('check', { cidr: '10.79.0.0/16' }, new Date()) }]);
  const handle = await add(t, etcd.netconf);
  await changeBlock(t, store, (block) => releaseOrdinals(block, ordinalsOf(block, handle)));
  let confirmed = 0;
  const found = await checkIpam(store, true, { gracePeriodSeconds: 0, now: new Date(), confirm: async () => void confirmed++ });
  t.is(confirmed, 0);
  t.deepEqual(kinds(found.text), [['handle-mismatch', handle]]);
});
