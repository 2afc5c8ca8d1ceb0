// The node controller, on each datastore: a deleted Kubernetes Node's addresses, blocks and
// affinities (and with etcd its Node resource) are released, except an address whose pod still
// exists, until that pod is gone; other nodes' are left alone; the cluster's version is then the
// lowest the remaining nodes record. With etcd, Node resources' labels follow the Kubernetes Nodes'.
import test, { type ExecutionContext } from 'ava';

import { ensureClusterInfo, readClusterInfo } from '../../ts/ipam/cluster-info.ts';
import { hostAffinity, keys } from '../../ts/model/keys.ts';
import { recordVersion } from '../../ts/node/startup/record-version.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { checkedBlocks } from '../../ts/model/checked-documents.ts';
import { openKubeClient } from '../../ts/k8s/client.ts';
import { openStore } from '../../ts/store/open.ts';
import { KubeStore } from '../../ts/store/kubernetes/store.ts';
import type { Entry, Store } from '../../ts/store/store.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { createNode, createPod, installCrds, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import {
  allocateFor,
  CONTROLLER_DATASTORE_RULES,
  CONTROLLER_RULES,
  controllersIdentity,
  createNodeResource,
  createPool,
  isHeld,
  isReleased,
  startControllers,
  status,
} from './fixtures.ts';

const shared = sharedTeardowns(test);
let kube: Kube;

test.before(async () => {
  kube = await startKube(shared);
  await installCrds(kube);
});

async function blocksOf(store: Store, node: string): Promise<string[]> {
  const [v4] = (await store.read([{ list: keys.blocks(4) }])) as [Entry<unknown>[]];
  return checkedBlocks(v4)
    .filter((entry) => entry.value.affinity === hostAffinity(node))
    .map((entry) => entry.value.cidr);
}

const affinitiesOf = (store: Store, node: string) => store.listKeys(keys.affinities(node, 4));

async function deletedNode(t: ExecutionContext, store: Store, env: Record<string, string>, label: string, cidr: string) {
  const etcd = env['DATASTORE_TYPE'] === 'etcdv3';
  const [gone, kept] = [`gone-${label}`, `kept-${label}`];
  await createNode(kube, t, gone);
  await createNode(kube, t, kept);
  if (etcd) {
    for (const node of [gone, kept]) await createNodeResource(store, node, {});
    // The deleted node was the last on an older release: once it is gone, the cluster runs this
    // one. (On the Kubernetes datastore the other tests' Nodes here record none, and so would
    // hold the cluster's version where it is.)
    await recordVersion('etcdv3', store, undefined, gone, 'v3.30.9');
    await recordVersion('etcdv3', store, undefined, kept, NETPLUG_VERSION);
    t.like(await ensureClusterInfo(store, NETPLUG_VERSION, 'k8s'), { netplugVersion: 'v3.30.9' });
  }
  await createPool(store, `nodes-${label}`, cidr);
  const running = await createPod(kube);
  const { namespace } = running;
  const onGone = {
    neverExisted: await allocateFor(store, gone, { namespace, name: 'never-existed' }),
    tunnel: await allocateFor(store, gone),
    running: await allocateFor(store, gone, running),
  };
  const onKept = [await allocateFor(store, kept, { namespace, name: 'never-existed-either' }), await allocateFor(store, kept)];

  const controllers = await startControllers(t, { ...env, ENABLED_CONTROLLERS: 'node' });
  await eventually('ready', async () => (await status(`${controllers.health}/readyz`)).code === 200);
  t.true(await isHeld(store, onGone.neverExisted), 'nothing is released while the node exists');

  await kube.core.deleteNode({ name: gone });
  await eventually(
    'the addresses of the deleted node are released',
    async () => (await isReleased(store, onGone.neverExisted)) && (await isReleased(store, onGone.tunnel)),
  );
  t.true(await isHeld(store, onGone.running), 'the address of a pod that still exists is kept');
  t.is((await blocksOf(store, gone)).length, 1, 'and the block holding it');
  await controllers.logged(
    "the deleted node's tunnel address released",
    (line) => line.includes(`released ${onGone.tunnel.address} `) && line.includes(`node ${gone} was deleted`),
  );

  await kube.core.deleteNamespacedPod({ namespace, name: running.name, gracePeriodSeconds: 0 });
  await eventually(
    'the block, its affinity and the rest are released',
    async () =>
      (await isReleased(store, onGone.running)) &&
      (await blocksOf(store, gone)).length === 0 &&
      (await affinitiesOf(store, gone)).length === 0 &&
      (!etcd || (await store.get(keys.node(gone))) === undefined),
  );

  if (etcd) {
    await eventually(
      "the cluster version is the remaining node's",
      async () => (await readClusterInfo(store))?.netplugVersion === NETPLUG_VERSION,
    );
    await controllers.logged('the cluster version change', `netplugVersion v3.30.9 → ${NETPLUG_VERSION}`);
  }
  for (const allocation of onKept) t.true(await isHeld(store, allocation), `${allocation.address} of the node that exists stays`);
  t.is((await blocksOf(store, kept)).length, 1);
  t.is((await affinitiesOf(store, kept)).length, 1);
  if (etcd) t.truthy(await store.get(keys.node(kept)), 'the Node resource of the node that exists stays');
  t.is(await controllers.stop(), 0);
}

test("etcd datastore: a deleted node's addresses, blocks, affinities and Node resource are released", async (t) => {
  const etcd = await startEtcd(t);
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-nodes-etcd', CONTROLLER_RULES);
  await deletedNode(
    t,
    store,
    { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: etcd.endpoints, KUBECONFIG: identity.kubeconfig },
    'etcd',
    '10.73.0.0/16',
  );
});

test("Kubernetes datastore: a deleted node's addresses, blocks and affinities are released", async (t) => {
  const store = new KubeStore(await openKubeClient({ kubeconfig: kube.server.admin.kubeconfig }));
  t.teardown(() => store.close());
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-nodes-kdd', [
    ...CONTROLLER_RULES,
    ...CONTROLLER_DATASTORE_RULES,
  ]);
  await deletedNode(t, store, { DATASTORE_TYPE: 'kubernetes', KUBECONFIG: identity.kubeconfig }, 'kdd', '10.74.0.0/16');
});

test("etcd datastore: Node resources' labels follow the Kubernetes Nodes'; none is created for an unregistered node", async (t) => {
  const etcd = await startEtcd(t);
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  const [registered, unregistered] = ['labels-registered', 'labels-unregistered'];
  await createNode(kube, t, registered, { zone: 'a' });
  await createNode(kube, t, unregistered, { zone: 'a' });
  await createNodeResource(store, registered, { stale: 'x' });
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-labels', CONTROLLER_RULES);
  const labelsOf = async (name: string) =>
    (await store.get<{ metadata: { labels: Record<string, string> } }>(keys.node(name)))?.value.metadata.labels;
  const sorted = (labels: Record<string, string> = {}) => JSON.stringify(Object.entries(labels).sort());
  const same = (a: Record<string, string> | undefined, b: Record<string, string>) => a !== undefined && sorted(a) === sorted(b);

  const controllers = await startControllers(t, {
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: identity.kubeconfig,
  });
  await eventually("the labels are the Kubernetes Node's", async () => same(await labelsOf(registered), { zone: 'a' }));

  const node = await kube.core.readNode({ name: registered });
  node.metadata = { ...node.metadata, labels: { zone: 'b', rack: 'r1' } };
  await kube.core.replaceNode({ name: registered, body: node });
  await eventually('the labels follow a change', async () => same(await labelsOf(registered), { zone: 'b', rack: 'r1' }));
  await controllers.logged('the labels written', `labels of Node resource ${registered}`);

  t.is(await store.get(keys.node(unregistered)), undefined, 'the node agent registers nodes, not the controllers');
  t.is(await controllers.stop(), 0);
});
