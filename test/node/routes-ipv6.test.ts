// IPv6 routes between nodes, on both datastores: three "nodes" (network namespaces on one
// dual-stack subnet, 172.30.1.0/24 and fd00:30:1::/64), each running the built netplug-node with
// IP6 set (explicitly on etcd, autodetect on the Kubernetes datastore), dual-stack pods made by
// the built CNI plugin (netplug-ipam with assign_ipv6) from an IPv4 and an IPv6 pool. Each node
// publishes its IPv6 address, routes the other nodes' IPv6 blocks directly via their IPv6
// addresses (`ip -6 route show proto 80`), and every pod pings every other over IPv6; a node
// removed from the datastore loses its IPv6 routes on the others. A pod's ipAddrsNoIpam IPv6
// address (in the IPv6 pool, outside every block) gets a /128 host route on the other nodes.
import test, { type ExecutionContext } from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { keys } from '../../ts/model/keys.ts';
import { ANNOTATIONS } from '../../ts/model/pod-annotations.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { formatPrefix, parsePrefix } from '../../ts/net/cidr.ts';
import { CNI_PLUGIN, NODE } from '../../ts/render/objects.ts';
import { renderRbac } from '../../ts/render/rbac.ts';
import { NODE_ADDRESS_ANNOTATIONS } from '../../ts/store/kubernetes/resources.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { requireBuilt } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { requireRoot } from '../helpers/kernel.ts';
import { installCrds, type Kube, removeIpamLockFileAfter, startKube } from '../helpers/kube.ts';
import { makeTopology, netplugRoutes, type Pod, type TestNode, type Topology } from '../helpers/nodes.ts';

const NAMES = ['n1', 'n2', 'n3'];
const V4_POOL_CIDR = '10.247.0.0/16';
const V6_POOL_CIDR = 'fd00:247::/48';

/** The pools: IPv4 and IPv6, neither encapsulated (routes between nodes of one subnet are direct). */
async function createPools(store: Store): Promise<void> {
  const now = new Date();
  for (const [name, cidr, blockSize] of [
    ['dual-v4', V4_POOL_CIDR, '26'],
    ['dual-v6', V6_POOL_CIDR, '122'],
  ] as const)
    if (!(await store.commit([{ key: keys.pool(name), create: poolResource(name, { cidr, 'block-size': blockSize }, now) }])))
      throw new Error(`pool ${name} was not created`);
}

const address6Of = (pod: Pod): string => {
  const found = pod.addresses.find((address) => address.includes(':'));
  if (!found) throw new Error(`pod on ${pod.node.name} has no IPv6 address: ${pod.addresses.join(', ')}`);
  return found;
};
const block6Of = (pod: Pod): string => formatPrefix(parsePrefix(`${address6Of(pod)}/122`) ?? { family: 6, base: 0n, length: 0 });

interface Datastore {
  store: Store;
  /** The topology options that differ per datastore. */
  netconf: Record<string, unknown>;
  agentEnv: Record<string, string>;
  ports: number[];
  /** Removes node `name` from the datastore (its agent stopped first). */
  removeNode(name: string): Promise<void>;
  /** The node's published IPv6 address as the datastore holds it. */
  published6(name: string): Promise<string | undefined>;
  /** The API server the plugin reads pods from (their ipAddrsNoIpam annotation). */
  kube: Kube;
}

/** An address of the IPv6 pool outside every block: the ipAddrsNoIpam pod's. */
const NO_IPAM6 = 'fd00:247:0:ff::5';

/**
 * A pod on n2 with an ipAddrsNoIpam IPv6 address (a Kubernetes pod, as the kubelet's ADD names it;
 * on the Kubernetes datastore its status gives netplug-node its address): n1 routes it to n2 with
 * a /128 via n2's IPv6 address and n1's pod pings it; the route goes with the pod.
 */
async function noIpamAddress6(t: ExecutionContext, datastore: Datastore, topology: Topology, client: Pod): Promise<void> {
  const [n1, n2] = topology.nodes as [TestNode, TestNode];
  const { kube } = datastore;
  const namespace = `no-ipam6-${process.pid}`;
  const name = 'fixed6';
  await kube.core.createNamespace({ body: { metadata: { name: namespace } } });
  t.teardown(() =>
    kube.core.deleteNamespace({ name: namespace }).then(
      () => undefined,
      () => undefined,
    ),
  );
  await kube.core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name, annotations: { [ANNOTATIONS.ipAddrsNoIpam]: JSON.stringify([NO_IPAM6]) } },
      spec: { nodeName: n2.name, containers: [{ name: 'main', image: 'busybox' }] },
    },
  });
  const pod = topology.addPod(n2, undefined, {
    args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name}`,
    netconf: {
      policy: { type: 'k8s' },
      kubernetes: { kubeconfig: kube.server.admin.kubeconfig },
      feature_control: { ip_addrs_no_ipam: true },
    },
  });
  t.deepEqual(pod.addresses, [NO_IPAM6]);
  const made = await kube.core.readNamespacedPod({ namespace, name });
  made.status = { ...made.status, phase: 'Running', podIP: NO_IPAM6, podIPs: [{ ip: NO_IPAM6 }] };
  await kube.core.replaceNamespacedPodStatus({ namespace, name, body: made });

  const route = `${NO_IPAM6} via ${n2.address6} dev eth0`;
  await eventually(`n1 routes ${NO_IPAM6} to n2`, () => netplugRoutes(n1.netns, 6).includes(route), { timeoutMs: 90_000 }).catch(
    (err: Error) => {
      throw new Error(`${err.message}; routes ${JSON.stringify(netplugRoutes(n1.netns, 6))}; log: ${n1.log().slice(-2000)}`);
    },
  );
  await eventually(
    `n1's pod pings the ipAddrsNoIpam address ${NO_IPAM6} on n2`,
    () => topology.exec(client.netns, ['ping', '-6', '-c', '1', '-W', '1', NO_IPAM6]).status === 0,
  );
  topology.deletePod(pod);
  await kube.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
  await eventually(
    `n1's route to ${NO_IPAM6} goes with the pod`,
    () => !netplugRoutes(n1.netns, 6).some((r) => r.startsWith(`${NO_IPAM6} `)),
    {
      timeoutMs: 90_000,
    },
  );
}

async function dualStackRoutes(t: ExecutionContext, datastore: Datastore, ip6: (node: TestNode) => string): Promise<void> {
  await createPools(datastore.store);
  const topology: Topology = await makeTopology(t, {
    nodes: NAMES.map((name) => ({ name, subnet: 1 })),
    ports: datastore.ports,
    datastoreNetconf: datastore.netconf,
    agentEnv: { ...datastore.agentEnv, NO_DEFAULT_POOLS: 'true', NETPLUG_ROUTE_REFRESH_INTERVAL: '3600' },
    ipam: () => ({ type: 'netplug-ipam', assign_ipv6: 'true' }),
    ipv6: true,
  });
  const node = (name: string) => topology.nodes.find((n) => n.name === name) as TestNode;
  for (const each of topology.nodes) each.startAgent({ IP6: ip6(each) });
  const pods = topology.nodes.map((each) => topology.addPod(each));
  for (const pod of pods) t.is(pod.addresses.length, 2, `pod on ${pod.node.name}: ${pod.addresses.join(', ')}`);

  for (const { name, address6 } of topology.nodes)
    await eventually(`node ${name} publishes its IPv6 address`, async () => (await datastore.published6(name)) === `${address6}/64`, {
      timeoutMs: 90_000,
    }).catch((err: Error) => {
      throw new Error(`${err.message}; log: ${node(name).log().slice(-2000)}`);
    });

  const on = (name: string) => pods.find((pod) => pod.node.name === name) as Pod;
  const expected = (from: string) =>
    NAMES.filter((name) => name !== from)
      .map((name) => `${block6Of(on(name))} via ${node(name).address6} dev eth0`)
      .sort();
  for (const name of NAMES)
    await eventually(
      `${name} routes the other nodes' IPv6 blocks directly`,
      () => {
        const routes = netplugRoutes(node(name).netns, 6);
        return expected(name).every((route) => routes.includes(route));
      },
      { timeoutMs: 90_000 },
    ).catch((err: Error) => {
      throw new Error(
        `${err.message}; routes ${JSON.stringify(netplugRoutes(node(name).netns, 6))}; log: ${node(name).log().slice(-2000)}`,
      );
    });
  t.deepEqual(netplugRoutes(node('n1').netns, 6), expected('n1'), "n1's IPv6 routes: the other nodes' blocks and nothing else");

  let pairs = 0;
  for (const from of pods)
    for (const to of pods) {
      if (from === to) continue;
      await eventually(
        `${from.node.name} pings ${address6Of(to)} on ${to.node.name} over IPv6`,
        () => topology.exec(from.netns, ['ping', '-6', '-c', '1', '-W', '1', address6Of(to)]).status === 0,
      ).catch((err: Error) => {
        for (const end of [from.node, to.node]) t.log(end.name, netplugRoutes(end.netns, 6), end.log().slice(-2000));
        throw err;
      });
      pairs++;
    }
  t.is(pairs, 6);
  await noIpamAddress6(t, datastore, topology, on('n1'));

  // n3 removed: the others lose their IPv6 route to its block, and still reach each other.
  const gone = node('n3');
  const goneBlock = block6Of(on('n3'));
  await gone.stopAgent();
  await datastore.removeNode('n3');
  for (const name of ['n1', 'n2'])
    await eventually(
      `${name} has no IPv6 route to n3's block`,
      () => !netplugRoutes(node(name).netns, 6).some((route) => route.startsWith(`${goneBlock} `)),
      { timeoutMs: 90_000 },
    );
  t.deepEqual(netplugRoutes(node('n1').netns, 6), [`${block6Of(on('n2'))} via ${node('n2').address6} dev eth0`]);
  t.is(topology.exec(on('n1').netns, ['ping', '-6', '-c', '1', '-W', '2', address6Of(on('n2'))]).status, 0);
}

test.serial('etcd: IP6 explicit; dual-stack pods on nodes of one subnet reach each other over IPv6 through direct routes', async (t) => {
  requireRoot();
  requireBuilt();
  const etcd = await startEtcd(t);
  const kube = await startKube(t);
  const store = await openStore({ datastore_type: 'etcdv3', etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  await dualStackRoutes(
    t,
    {
      store,
      netconf: etcd.netconf,
      agentEnv: { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: etcd.endpoints, KUBECONFIG: kube.server.admin.kubeconfig },
      ports: [etcd.port, Number(new URL(kube.server.url).port)],
      kube,
      async removeNode(name) {
        const entry = await store.get(keys.node(name));
        if (!entry || !(await store.commit([{ key: entry.key, remove: true, revision: entry.revision }])))
          throw new Error(`node ${name} was not removed`);
      },
      async published6(name) {
        return (await store.get<{ spec?: { bgp?: { ipv6Address?: string } } }>(keys.node(name)))?.value.spec?.bgp?.ipv6Address;
      },
    },
    (node) => `${node.address6}/64`,
  );
});

test.serial('Kubernetes datastore: IP6 autodetect, published as projectnet.org/IPv6Address; the same IPv6 routes', async (t) => {
  requireRoot();
  requireBuilt();
  removeIpamLockFileAfter(t);
  const kube: Kube = await startKube(t);
  await installCrds(kube);
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } });
  t.teardown(() => store.close());
  for (const name of NAMES) await kube.core.createNode({ body: { metadata: { name, labels: { 'kubernetes.io/hostname': name } } } });
  // Exactly the ClusterRoles the manifests ship for netplug-node and the CNI plugin.
  const rules = (name: string) =>
    (
      renderRbac({ datastore: 'kubernetes', namespace: 'kube-system', image: 'netplug:test' }).find(
        (object) => object.kind === 'ClusterRole' && object.metadata.name === name,
      ) as { rules: k8s.V1PolicyRule[] } | undefined
    )?.rules ?? [];
  const agent = await kube.identityWith('netplug-node-routes-ipv6', [...rules(NODE), ...rules(CNI_PLUGIN)]);
  await dualStackRoutes(
    t,
    {
      store,
      netconf: { datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } },
      agentEnv: { DATASTORE_TYPE: 'kubernetes', KUBECONFIG: agent.kubeconfig },
      ports: [Number(new URL(kube.server.url).port)],
      kube,
      async removeNode(name) {
        await kube.core.deleteNode({ name });
      },
      async published6(name) {
        return (await kube.core.readNode({ name })).metadata?.annotations?.[NODE_ADDRESS_ANNOTATIONS.ipv6Address];
      },
    },
    () => 'autodetect',
  );
});
