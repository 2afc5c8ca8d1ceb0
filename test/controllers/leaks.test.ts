// Leak repair (the ipam controller), on each datastore: an address whose pod never existed or was
// deleted is released with its handle and workload endpoint after the grace period; an address
// whose pod exists (also a pod deleted and created again under the same name) and an address
// that names no pod are never released, over many passes.
import test, { type ExecutionContext } from 'ava';

import { openKubeClient } from '../../ts/k8s/client.ts';
import { openStore } from '../../ts/store/open.ts';
import { KubeStore } from '../../ts/store/kubernetes/store.ts';
import type { Store } from '../../ts/store/store.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { createPod, installCrds, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import {
  allocateFor,
  CONTROLLER_DATASTORE_RULES,
  CONTROLLER_RULES,
  controllersIdentity,
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

async function leakRepair(t: ExecutionContext, store: Store, env: Record<string, string>, label: string, cidr: string) {
  const node = `leaks-${label}`;
  await kube.core.createNode({ body: { metadata: { name: node } } });
  t.teardown(() => kube.core.deleteNode({ name: node }).catch(() => undefined));
  await createPool(store, `leaks-${label}`, cidr);

  const alive = await createPod(kube);
  const { namespace } = alive;
  const deleted = await createPod(kube, { namespace });
  const recreated = await createPod(kube, { namespace });
  const never = { namespace, name: 'never-existed' };
  const [ofAlive, ofDeleted, ofRecreated, ofNever, tunnel] = [
    await allocateFor(store, node, alive),
    await allocateFor(store, node, deleted),
    await allocateFor(store, node, recreated),
    await allocateFor(store, node, never),
    await allocateFor(store, node),
  ];
  // The pod the allocation was made for is gone; another of the same name exists.
  await kube.core.deleteNamespacedPod({ namespace, name: recreated.name, gracePeriodSeconds: 0 });
  await createPod(kube, { namespace, name: recreated.name });

  const controllers = await startControllers(t, env);
  await eventually('the address of the pod that never existed is released', () => isReleased(store, ofNever));
  await controllers.logged(
    'one line saying what was released and why',
    (line) => / INFO released .* of pod .*never-existed .*pod missing for/.test(line) && line.includes(ofNever.address),
  );
  t.true(await isHeld(store, ofDeleted), 'the pod still exists');

  await kube.core.deleteNamespacedPod({ namespace, name: deleted.name, gracePeriodSeconds: 0 });
  await eventually('the address of the deleted pod is released', () => isReleased(store, ofDeleted));

  // Passes went by (at least the grace period twice over): the others stay.
  for (const [what, allocation] of Object.entries({ ofAlive, ofRecreated, tunnel }))
    t.true(await isHeld(store, allocation), `${what} (${allocation.address}) is still allocated`);
  t.truthy(ofAlive.endpointKey && (await store.get(ofAlive.endpointKey)), 'the live pod keeps its workload endpoint');
  t.is((await status(`${controllers.health}/readyz`)).code, 200);
  t.is(await controllers.stop(), 0, 'exits 0 when the signal aborts');
}

test("etcd datastore: leaked addresses are released after the grace period, never a live pod's", async (t) => {
  const etcd = await startEtcd(t);
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-leaks-etcd', CONTROLLER_RULES);
  await leakRepair(
    t,
    store,
    { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: etcd.endpoints, KUBECONFIG: identity.kubeconfig },
    'etcd',
    '10.71.0.0/16',
  );
});

test("Kubernetes datastore: leaked addresses are released after the grace period, never a live pod's", async (t) => {
  const store = new KubeStore(await openKubeClient({ kubeconfig: kube.server.admin.kubeconfig }));
  t.teardown(() => store.close());
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-leaks-kdd', [
    ...CONTROLLER_RULES,
    ...CONTROLLER_DATASTORE_RULES,
  ]);
  await leakRepair(t, store, { DATASTORE_TYPE: 'kubernetes', KUBECONFIG: identity.kubeconfig }, 'kdd', '10.72.0.0/16');
});
