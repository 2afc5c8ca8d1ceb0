// The group commit (ts/ipam/waiting-adds.ts): ADDs queued for their node's turn in a resident agent
// are allocated for by the ADD holding the turn, in its own commit. The core runs in-process as
// netplug-node runs it, on a real etcd and a real kube-apiserver: a burst costs fewer commits of the
// block than ADDs, every address is distinct and recorded in its own handle, and an ADD whose
// endpoint cannot be written fails alone and holds no address.
import test, { type ExecutionContext } from 'ava';

import { KnownNodes } from '../../ts/ipam/known-nodes.ts';
import { isBlockKey, keys } from '../../ts/model/keys.ts';
import { checkedBlock } from '../../ts/model/checked-documents.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { WaitingAdds } from '../../ts/ipam/waiting-adds.ts';
import { nodeTurns } from '../../ts/node/cni/cni-services.ts';
import { runMain } from '../../ts/plugin/main.ts';
import type { PluginServices } from '../../ts/plugin/services.ts';
import { openGrpcStore } from '../../ts/store/etcd/grpc.ts';
import { openStore } from '../../ts/store/open.ts';
import { openKubeClient } from '../../ts/k8s/client.ts';
import { openHttp2 } from '../../ts/net/http2-client.ts';
import { KubeStore } from '../../ts/store/kubernetes/store.ts';
import type { Store, Write } from '../../ts/store/store.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ipamNetconf } from '../helpers/ipam.ts';
import { hostVeth } from '../helpers/cni.ts';
import { containerId, createNetns, link } from '../helpers/kernel.ts';
import { installCrds, startKube } from '../helpers/kube.ts';

const BURST = 30;

const isBlockWrite = (w: Write) => isBlockKey(w.key);

/**
 * The agent's services over `store`: counting the commits that write a block, and refusing, as an
 * unreachable datastore would, any commit that writes a key `refuse` accepts. The first commit
 * that writes a block waits for `beforeFirstBlockCommit`, if given.
 */
function agentServices(
  store: Store,
  refuse: (key: string) => boolean = () => false,
  beforeFirstBlockCommit?: (waiting: WaitingAdds) => Promise<void>,
) {
  const counts = { blockCommits: 0, otherCommits: 0, servedTogether: 0, refusedWithBlock: 0, refusedAlone: 0, refusedServing: 0 };
  let held: Promise<void> | undefined;
  const shared = new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property === 'close') return () => undefined;
      if (property !== 'commit' && property !== 'commitElseRead') return typeof value === 'function' ? value.bind(target) : value;
      return async (writes: readonly Write[], ...rest: unknown[]) => {
        if (beforeFirstBlockCommit && writes.some(isBlockWrite)) {
          held ??= beforeFirstBlockCommit(waiting);
          await held;
        }
        if (writes.some((w) => refuse(w.key))) {
          counts[writes.some(isBlockWrite) ? 'refusedWithBlock' : 'refusedAlone']++;
          // A commit that served others: it created more than one handle.
          if (writes.filter((w) => w.key.startsWith(keys.handles) && 'create' in w).length > 1) counts.refusedServing++;
          return Promise.reject(new Error('refused for the test'));
        }
        counts[writes.some(isBlockWrite) ? 'blockCommits' : 'otherCommits']++;
        return value.apply(target, [writes, ...rest]);
      };
    },
  }) as Store;
  const known = new KnownNodes();
  const waiting = new WaitingAdds((n) => {
    counts.servedTogether += n;
  });
  const services: PluginServices = {
    via: 'netplug-node',
    store: () => Promise.resolve(shared),
    ipamTurns: nodeTurns(),
    knownNodes: () => known,
    waitingAdds: () => waiting,
  };
  return { services, counts };
}

async function run(
  services: PluginServices,
  program: 'netplug' | 'netplug-ipam',
  netconf: object,
  command: string,
  id: string,
  netns: string,
) {
  const env = { CNI_COMMAND: command, CNI_CONTAINERID: id, CNI_NETNS: netns, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' };
  const io = { env, readStdin: () => Buffer.from(JSON.stringify(netconf)), stderr: () => undefined, pid: process.pid };
  return runMain(io, program, services);
}

/** Until `count` ADDs of `node` wait for its turn (at most 30 s: the test's assertions then say what happened). */
async function queued(waiting: WaitingAdds, node: string, count: number): Promise<void> {
  for (let tries = 0; tries < 3000 && waiting.waiting(node, count).length < count; tries++)
    await new Promise((resolve) => setTimeout(resolve, 10));
}

const allocated = async (store: Store) =>
  (await store.list(keys.blocks(4))).map(checkedBlock).reduce((n, b) => n + b.value.allocations.filter((a) => a !== null).length, 0);

const createPool = (store: Store, name: string, cidr: string) =>
  store.commit([{ key: keys.pool(name), create: poolResource(name, { cidr }, new Date()) }]);

/** BURST ADDs at once on one node, one of them repeated, then their DELs. */
async function burst(t: ExecutionContext, store: Store, netconf: { name: string }) {
  const { services, counts } = agentServices(store);
  const netns = createNetns(t, 'group').path;
  const ids = Array.from({ length: BURST }, () => containerId());
  // One container's ADD three times at once (a runtime's retries): one address, one handle.
  const repeated = ids[3] as string;
  const adds = await Promise.all([...ids, repeated, repeated].map((id) => run(services, 'netplug-ipam', netconf, 'ADD', id, netns)));
  t.deepEqual(
    adds.filter((a) => a.exitCode !== 0).map((a) => a.stdout),
    [],
    'every ADD succeeded',
  );
  const addresses = adds.map((a) => String(JSON.parse(a.stdout).ips[0].address));
  t.is(new Set(addresses).size, BURST, 'an address each');
  t.deepEqual(addresses.slice(BURST), [addresses[3], addresses[3]], 'a repeated ADD gets the same address');
  t.is(await allocated(store), BURST);
  // Facts read before a commit claimed the node's block do not make a later ADD claim another.
  t.is((await store.listKeys(keys.blocks(4))).length, 1, 'one block for the node, as the burst fits in it');
  t.is((await store.listKeys(`${keys.handles}${netconf.name}.`)).length, BURST, 'a handle each');
  t.log(`${BURST} ADDs: ${counts.blockCommits} commits of the block, ${counts.servedTogether} ADDs served by another's`);
  t.true(counts.servedTogether > 0, 'waiting ADDs were served by the commit in the turn');
  t.true(counts.blockCommits < BURST, `fewer commits of the block (${counts.blockCommits}) than ADDs`);

  const dels = await Promise.all(ids.map((id) => run(services, 'netplug-ipam', netconf, 'DEL', id, netns)));
  t.deepEqual(
    dels.filter((d) => d.exitCode !== 0).map((d) => d.stdout),
    [],
  );
  t.is(await allocated(store), 0, 'every address released');
  t.deepEqual(await store.listKeys(`${keys.handles}${netconf.name}.`), []);
}

test('etcd: a burst of ADDs on one node is committed in groups, an address and a handle each', async (t) => {
  const etcd = await startEtcd(t);
  // Over gRPC, as netplug-node talks to etcd: one connection carries many requests at once.
  const store = await openGrpcStore(etcd.netconf);
  t.teardown(() => store.close());
  await createPool(store, 'group', '10.79.0.0/16');
  await burst(t, store, ipamNetconf(etcd, { node: 'node-group', name: 'group' }));
});

test('Kubernetes datastore: a burst of ADDs on one node is committed in groups, an address and a handle each', async (t) => {
  const kube = await startKube(t);
  await installCrds(kube);
  await kube.core.createNode({ body: { metadata: { name: 'node-group-kdd' } } });
  const kubeconfig = kube.server.admin.kubeconfig;
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig } });
  t.teardown(() => store.close());
  await createPool(store, 'group-kdd', '10.78.0.0/16');
  const netconf = kddNetconf('groupkdd', 'node-group-kdd', kubeconfig);
  await burst(t, store, netconf);
});

/** netplug on the Kubernetes datastore that `kubeconfig` reaches, as node `node`. */
const kddNetconf = (name: string, node: string, kubeconfig: string) => ({
  cniVersion: '1.1.0',
  name,
  type: 'netplug',
  nodename: node,
  datastore_type: 'kubernetes',
  kubernetes: { kubeconfig },
  ipam: { type: 'netplug-ipam' },
});

/** Eight ADDs on `node`, the first commit of the block held until the others wait: it serves them, endpoints and all. */
async function servedWithEndpoints(t: ExecutionContext, store: Store, netconf: object, node: string) {
  const pods = Array.from({ length: 8 }, () => ({ id: containerId(), netns: createNetns(t, 'gwep') }));
  const { services, counts } = agentServices(
    store,
    () => false,
    (waiting) => queued(waiting, node, pods.length - 1),
  );
  const adds = await Promise.all(pods.map((p) => run(services, 'netplug', netconf, 'ADD', p.id, p.netns.path)));
  t.deepEqual(
    adds.filter((a) => a.exitCode !== 0).map((a) => a.stdout),
    [],
  );
  t.log(`${pods.length} ADDs: ${counts.blockCommits} commits of the block, ${counts.otherCommits} others, ${counts.servedTogether} served`);
  t.true(counts.servedTogether > 0, "ADDs were served by another's commit");
  t.is(counts.otherCommits, 0, 'no ADD committed anything outside a commit of the block');
  t.is((await store.listKeys(keys.workloadEndpoints)).length, pods.length, 'an endpoint for each pod');
  await Promise.all(pods.map((p) => run(services, 'netplug', netconf, 'DEL', p.id, p.netns.path)));
  t.is(await allocated(store), 0);
  t.deepEqual(await store.listKeys(keys.workloadEndpoints), []);
}

test("etcd: ADDs of pods served by another's commit have their endpoints written in it, and write nothing after", async (t) => {
  const etcd = await startEtcd(t);
  const store = await openGrpcStore(etcd.netconf);
  t.teardown(() => store.close());
  await createPool(store, 'groupwep', '10.81.0.0/16');
  await servedWithEndpoints(t, store, ipamNetconf(etcd, { node: 'node-group-wep', name: 'groupwep' }), 'node-group-wep');
});

test("Kubernetes datastore, over HTTP/2 as netplug-node: served ADDs' endpoints go with the commit that serves them", async (t) => {
  const kube = await startKube(t);
  await installCrds(kube);
  await kube.core.createNode({ body: { metadata: { name: 'node-group-wep-kdd' } } });
  const kubeconfig = kube.server.admin.kubeconfig;
  const client = await openKubeClient({ kubeconfig }, { multiplexWith: openHttp2 });
  t.true(client.multiplexed);
  const store = new KubeStore(client);
  t.teardown(() => store.close());
  await createPool(store, 'groupwep-kdd', '10.77.0.0/16');
  const netconf = kddNetconf('groupwepkdd', 'node-group-wep-kdd', kubeconfig);
  await servedWithEndpoints(t, store, netconf, 'node-group-wep-kdd');
});

test('etcd: an ADD whose endpoint cannot be written fails and holds no address, whether served by another or in its own turn; the others are networked', async (t) => {
  const etcd = await startEtcd(t);
  const store = await openGrpcStore(etcd.netconf);
  t.teardown(() => store.close());
  await createPool(store, 'groupfail', '10.80.0.0/16');
  const netconf = ipamNetconf(etcd, { node: 'node-group-fail', name: 'groupfail' });
  const pods = Array.from({ length: 8 }, () => ({ id: containerId(), netns: createNetns(t, 'gfail') }));
  const failing = pods.slice(2, 5).map((p) => p.id);
  // A failing ADD takes the node's turn first, and its commit of the block waits until every other
  // ADD is queued: it is refused in its own turn, and the next turn's commit serves the others,
  // failing ones included, with their endpoints: refused, it goes again serving nobody, and each
  // failing ADD is refused in its own turn (however the machine schedules them).
  let commitReached = () => {};
  const reached = new Promise<void>((resolve) => (commitReached = resolve));
  const { services, counts } = agentServices(
    store,
    (key) => key.startsWith(keys.workloadEndpoints) && failing.some((id) => key.includes(id)),
    (waiting) => {
      commitReached();
      return queued(waiting, 'node-group-fail', pods.length - 1);
    },
  );
  const add = (p: (typeof pods)[number]) => run(services, 'netplug', netconf, 'ADD', p.id, p.netns.path);
  const first = add(pods[2] as (typeof pods)[number]);
  await Promise.race([reached, first]);
  const adds = await Promise.all(pods.map((p, i) => (i === 2 ? first : add(p))));
  t.log(`refused: ${counts.refusedWithBlock} commits in the turn (${counts.refusedServing} serving others), ${counts.refusedAlone} others`);
  t.true(counts.refusedWithBlock > 0, "a commit in a failing ADD's own turn was refused");
  t.true(counts.refusedServing > 0, 'a commit serving a failing ADD, its endpoint with it, was refused');
  for (const [i, p] of pods.entries()) {
    const handle = await store.get(keys.handle(`${netconf.name}.${p.id}`));
    if (failing.includes(p.id)) {
      t.not(adds[i]?.exitCode, 0, `pod ${i} failed`);
      t.regex(adds[i]?.stdout ?? '', /refused for the test/);
      t.is(handle, undefined, `pod ${i} holds no address`);
      t.is(link('eth0', p.netns), undefined, `pod ${i} has no interface left`);
      t.is(link(hostVeth(p.id)), undefined, `pod ${i}'s host veth is gone`);
    } else {
      t.is(adds[i]?.exitCode, 0, adds[i]?.stdout);
      t.truthy(handle, `pod ${i} holds its address`);
      t.truthy(link('eth0', p.netns), `pod ${i} is networked`);
    }
  }
  t.is(await allocated(store), pods.length - failing.length, 'only the networked pods hold addresses');
  t.is((await store.listKeys(keys.workloadEndpoints)).length, pods.length - failing.length, 'an endpoint for each networked pod');
  await Promise.all(pods.map((p) => run(services, 'netplug', netconf, 'DEL', p.id, p.netns.path)));
  t.is(await allocated(store), 0);
});
