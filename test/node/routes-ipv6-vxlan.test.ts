// VXLAN over IPv6 between nodes, on both datastores: three "nodes" on a dual-stack underlay, n1
// and n2 on one subnet (172.30.1.0/24, fd00:30:1::/64), n3 behind the router on another
// (172.30.2.0/24, fd00:30:2::/64), each running the built netplug-node with IP6 set; dual-stack pods from an IPv4
// and an IPv6 pool, both VXLAN CrossSubnet. Same-subnet IPv6 blocks are routed directly, n3's over
// the IPv6 VXLAN device vxlan6.netplug (beside the IPv4 one, of the same VNI) via its IPv6 tunnel
// address; every pod pings every other over IPv6 and IPv4. The IPv6 pool's VXLAN turned off, the
// device and its routes go, and the tunnel address is given back (on the Kubernetes datastore,
// where it travels as annotations on the Node, they are removed).
import test, { type ExecutionContext } from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { keys } from '../../ts/model/keys.ts';
import type { PoolResource } from '../../ts/model/ip-pool.ts';
import type { NodeResource } from '../../ts/model/node.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { formatPrefix, parsePrefix } from '../../ts/net/cidr.ts';
import { CNI_PLUGIN, NODE } from '../../ts/render/objects.ts';
import { renderRbac } from '../../ts/render/rbac.ts';
import { NODE_ADDRESS_ANNOTATIONS } from '../../ts/store/kubernetes/resources.ts';
import { openStore } from '../../ts/store/open.ts';
import { retryOnConflict, type Store } from '../../ts/store/store.ts';
import { requireBuilt } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { requireRoot } from '../helpers/kernel.ts';
import { installCrds, removeIpamLockFileAfter, startKube } from '../helpers/kube.ts';
import { makeTopology, netplugRoutes, type Pod, SUBNETS6, type TestNode } from '../helpers/nodes.ts';

const V6_POOL = 'vx-v6';

interface Datastore {
  store: Store;
  netconf: Record<string, unknown>;
  agentEnv: Record<string, string>;
  ports: number[];
}

async function vxlanOverIpv6(t: ExecutionContext, datastore: Datastore): Promise<void> {
  const { store } = datastore;
  const now = new Date();
  for (const [name, cidr, blockSize] of [
    ['vx-v4', '10.248.0.0/16', '26'],
    [V6_POOL, 'fd00:248::/48', '122'],
  ] as const)
    t.true(
      await store.commit([
        { key: keys.pool(name), create: poolResource(name, { cidr, 'block-size': blockSize, 'vxlan-mode': 'CrossSubnet' }, now) },
      ]),
    );

  const topology = await makeTopology(t, {
    nodes: [
      { name: 'n1', subnet: 1 },
      { name: 'n2', subnet: 1 },
      { name: 'n3', subnet: 2 },
    ],
    ports: datastore.ports,
    datastoreNetconf: datastore.netconf,
    agentEnv: { ...datastore.agentEnv, NO_DEFAULT_POOLS: 'true', NETPLUG_ROUTE_REFRESH_INTERVAL: '3600' },
    ipam: () => ({ type: 'netplug-ipam', assign_ipv6: 'true' }),
    ipv6: true,
  });
  const node = (name: string) => topology.nodes.find((n) => n.name === name) as TestNode;
  for (const each of topology.nodes) each.startAgent({ IP6: `${each.address6}/64` });
  const pods = topology.nodes.map((each) => topology.addPod(each));
  const on = (name: string) => pods.find((pod) => pod.node.name === name) as Pod;
  const v6 = (pod: Pod) => pod.addresses.find((address) => address.includes(':')) ?? '';
  const v4 = (pod: Pod) => pod.addresses.find((address) => !address.includes(':')) ?? '';
  const block6 = (pod: Pod) => formatPrefix(parsePrefix(`${v6(pod)}/122`) ?? { family: 6, base: 0n, length: 0 });

  const tunnel6 = async (name: string) => (await store.get<NodeResource>(keys.node(name)))?.value.spec.ipv6VXLANTunnelAddr;
  await eventually('n3 publishes its IPv6 VXLAN tunnel address', async () => (await tunnel6('n3')) !== undefined, {
    timeoutMs: 90_000,
  }).catch((err: Error) => {
    throw new Error(`${err.message}; log: ${node('n3').log().slice(-2000)}`);
  });
  const n3Tunnel = (await tunnel6('n3')) ?? '';
  t.true(parsePrefix(`${n3Tunnel}/128`)?.family === 6 && n3Tunnel.startsWith('fd00:248:'), n3Tunnel);
  const wanted = [
    `${block6(on('n2'))} via ${node('n2').address6} dev eth0`,
    `${block6(on('n3'))} via ${n3Tunnel} dev vxlan6.netplug onlink`,
  ];
  await eventually(
    'n1 routes n2 directly and n3 over IPv6 VXLAN',
    () => {
      const routes = netplugRoutes(node('n1').netns, 6);
      return wanted.every((route) => routes.includes(route));
    },
    { timeoutMs: 90_000 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; routes ${JSON.stringify(netplugRoutes(node('n1').netns, 6))}; log: ${node('n1').log().slice(-2000)}`);
  });
  const device = topology.exec(node('n1').netns, ['ip', '-d', 'link', 'show', 'vxlan6.netplug']).stdout;
  t.regex(device, /vxlan id 4096 local fd00:30:1::1 .*dstport 4789/);
  t.regex(topology.exec(node('n1').netns, ['ip', '-d', 'link', 'show', 'vxlan.netplug']).stdout, /vxlan id 4096 local 172\.30\.1\.1 /);

  let pairs = 0;
  for (const from of pods)
    for (const to of pods) {
      if (from === to) continue;
      for (const [flag, address] of [
        ['-6', v6(to)],
        ['-4', v4(to)],
      ] as const)
        await eventually(
          `${from.node.name} pings ${address} on ${to.node.name}`,
          () => topology.exec(from.netns, ['ping', flag, '-c', '1', '-W', '1', address]).status === 0,
        ).catch((err: Error) => {
          for (const end of [from.node, to.node]) t.log(end.name, netplugRoutes(end.netns, 6), end.log().slice(-2000));
          throw err;
        });
      pairs++;
    }
  t.is(pairs, 6);

  // The IPv6 pool's VXLAN off: n1's IPv6 VXLAN device and its route go (n3 is then left to the underlay).
  await retryOnConflict("turning the IPv6 pool's VXLAN off", async () => {
    const entry = await store.get<PoolResource>(keys.pool(V6_POOL));
    if (!entry) throw new Error('no IPv6 pool');
    const update = { ...entry.value, spec: { ...entry.value.spec, vxlanMode: 'Never' as const } };
    return (await store.commit([{ key: entry.key, update, revision: entry.revision }])) || undefined;
  });
  await eventually(
    'n1 has no IPv6 VXLAN device nor route',
    () =>
      topology.exec(node('n1').netns, ['ip', 'link', 'show', 'vxlan6.netplug']).status !== 0 &&
      !netplugRoutes(node('n1').netns, 6).some((route) => route.includes('vxlan-v6')),
    { timeoutMs: 90_000 },
  );
  t.deepEqual(netplugRoutes(node('n1').netns, 6), [`${block6(on('n2'))} via ${node('n2').address6} dev eth0`]);
  t.true(topology.exec(node('n1').netns, ['ip', 'link', 'show', 'vxlan.netplug']).status === 0, 'the IPv4 VXLAN device stays');
}

test.serial('etcd: an IPv6 VXLAN CrossSubnet pool; same-subnet nodes direct, the other subnet over vxlan6.netplug', async (t) => {
  requireRoot();
  requireBuilt();
  const etcd = await startEtcd(t);
  const kube = await startKube(t);
  const store = await openStore({ datastore_type: 'etcdv3', etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  await vxlanOverIpv6(t, {
    store,
    netconf: etcd.netconf,
    agentEnv: { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: etcd.endpoints, KUBECONFIG: kube.server.admin.kubeconfig },
    ports: [etcd.port, Number(new URL(kube.server.url).port)],
  });
});

test.serial('Kubernetes datastore: the IPv6 tunnel address and MAC as annotations; the same routes and pings', async (t) => {
  requireRoot();
  requireBuilt();
  removeIpamLockFileAfter(t);
  const kube = await startKube(t);
  await installCrds(kube);
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } });
  t.teardown(() => store.close());
  for (const name of ['n1', 'n2', 'n3'])
    await kube.core.createNode({ body: { metadata: { name, labels: { 'kubernetes.io/hostname': name } } } });
  // Exactly the ClusterRoles the manifests ship for netplug-node and the CNI plugin.
  const rules = (name: string) =>
    (
      renderRbac({ datastore: 'kubernetes', namespace: 'kube-system', image: 'netplug:test' }).find(
        (object) => object.kind === 'ClusterRole' && object.metadata.name === name,
      ) as { rules: k8s.V1PolicyRule[] } | undefined
    )?.rules ?? [];
  const agent = await kube.identityWith('netplug-node-routes-ipv6-vxlan', [...rules(NODE), ...rules(CNI_PLUGIN)]);
  await vxlanOverIpv6(t, {
    store,
    netconf: { datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } },
    agentEnv: { DATASTORE_TYPE: 'kubernetes', KUBECONFIG: agent.kubeconfig },
    ports: [Number(new URL(kube.server.url).port)],
  });
  // The tunnel address the routes went through was read from n3's annotations (the store maps
  // them to the Node's spec); with the pool's VXLAN off it was given back, and they are gone.
  await eventually('n3 no longer publishes an IPv6 VXLAN tunnel address', async () => {
    const annotations = (await kube.core.readNode({ name: 'n3' })).metadata?.annotations ?? {};
    return (
      annotations[NODE_ADDRESS_ANNOTATIONS.ipv6VXLANTunnelAddr] === undefined &&
      annotations[NODE_ADDRESS_ANNOTATIONS.vxlanTunnelMACAddrV6] === undefined &&
      annotations[NODE_ADDRESS_ANNOTATIONS.ipv6Address] === `${SUBNETS6[2]}::3/64`
    );
  });
});
