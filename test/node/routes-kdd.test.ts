// Routes between nodes on the Kubernetes datastore: the same four "nodes" as routes.test.ts (n1–n3
// on one subnet, n4 behind a router), each running the built netplug-node in its namespace with
// exactly the ClusterRoles the manifests ship for netplug-node (its own and the CNI plugin's, which
// it is bound to), pods made by the built CNI plugin on the same API server. The node addresses
// travel as annotations on the Kubernetes Nodes; a VXLAN CrossSubnet pool sends same-subnet pairs
// direct and n4's over VXLAN, with tunnel addresses taken from the pool's custom resources.
import test from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { keys } from '../../ts/model/keys.ts';
import type { PoolResource } from '../../ts/model/ip-pool.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { CNI_PLUGIN, NODE } from '../../ts/render/objects.ts';
import { renderRbac } from '../../ts/render/rbac.ts';
import { NODE_ADDRESS_ANNOTATIONS } from '../../ts/store/kubernetes/resources.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { requireBuilt } from '../helpers/cni.ts';
import { requireRoot } from '../helpers/kernel.ts';
import { installCrds, removeIpamLockFileAfter, startKube, type Kube } from '../helpers/kube.ts';
import { makeTopology, netplugRoutes, type Pod, type TestNode, type Topology } from '../helpers/nodes.ts';
import { eventually } from '../helpers/eventually.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

const POOL = 'routes-kdd';
const shared = sharedTeardowns(test);
let kube: Kube;
let topology: Topology;
let store: Store;
let pods: Pod[] = [];

/** The rules of a ClusterRole the manifests ship on the Kubernetes datastore. */
function shippedRules(name: string): k8s.V1PolicyRule[] {
  const role = renderRbac({ datastore: 'kubernetes', namespace: 'kube-system', image: 'netplug:test' }).find(
    (object) => object.kind === 'ClusterRole' && object.metadata.name === name,
  ) as { rules: k8s.V1PolicyRule[] } | undefined;
  if (!role) throw new Error(`no ClusterRole ${name} in the manifests`);
  return role.rules;
}

test.before(async () => {
  requireRoot();
  requireBuilt();
  removeIpamLockFileAfter(shared);
  kube = await startKube(shared);
  await installCrds(kube);
  store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } });
  shared.teardown(() => store.close());
  const pool = poolResource(POOL, { cidr: '10.246.0.0/16', 'block-size': '26', 'vxlan-mode': 'CrossSubnet' }, new Date());
  await store.commit([{ key: keys.pool(POOL), create: pool }]);
  const names = ['n1', 'n2', 'n3', 'n4'];
  for (const name of names) await kube.core.createNode({ body: { metadata: { name, labels: { 'kubernetes.io/hostname': name } } } });
  const agent = await kube.identityWith('netplug-node-routes-kdd', [...shippedRules(NODE), ...shippedRules(CNI_PLUGIN)]);
  const port = Number(new URL(kube.server.url).port);
  topology = await makeTopology(shared, {
    nodes: names.map((name) => ({ name, subnet: name === 'n4' ? 2 : 1 })),
    ports: [port],
    datastoreNetconf: { datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } },
    // An hour's refresh: every change the agents make comes from the Kubernetes API's watch.
    agentEnv: {
      DATASTORE_TYPE: 'kubernetes',
      KUBECONFIG: agent.kubeconfig,
      NO_DEFAULT_POOLS: 'true',
      NETPLUG_ROUTE_REFRESH_INTERVAL: '3600',
    },
  });
  for (const node of topology.nodes) node.startAgent();
  pods = topology.nodes.map((node) => topology.addPod(node));
});

const node = (name: string) => topology.nodes.find((n) => n.name === name) as TestNode;

test.serial('each agent publishes its address and VXLAN tunnel address as annotations on its Kubernetes Node', async (t) => {
  for (const { name, address } of topology.nodes) {
    await eventually(
      `node ${name} is annotated`,
      async () => {
        const annotations = (await kube.core.readNode({ name })).metadata?.annotations ?? {};
        return annotations[NODE_ADDRESS_ANNOTATIONS.vxlanTunnelMACAddr] !== undefined;
      },
      { timeoutMs: 90_000 },
    ).catch((err: Error) => {
      throw new Error(`${err.message}; log: ${node(name).log().slice(-2000)}`);
    });
    const annotations = (await kube.core.readNode({ name })).metadata?.annotations ?? {};
    t.is(annotations[NODE_ADDRESS_ANNOTATIONS.ipv4Address], `${address}/24`);
    t.regex(annotations[NODE_ADDRESS_ANNOTATIONS.ipv4VXLANTunnelAddr] ?? '', /^10\.246\./);
  }
  // The store reads them back as the etcd Node's spec fields.
  const entry = await store.get<{ spec: Record<string, unknown> }>(keys.node('n1'));
  t.like(entry?.value.spec, { bgp: { ipv4Address: `${node('n1').address}/24` } });
});

test.serial(
  'VXLAN CrossSubnet on the Kubernetes datastore: same-subnet pairs direct, n4 over VXLAN; every pod pings every other',
  async (t) => {
    const blockOf = (pod: Pod) => {
      const [a, b, c, d] = pod.address.split('.').map(Number) as [number, number, number, number];
      return `${a}.${b}.${c}.${d - (d % 64)}/26`;
    };
    const on = (name: string) => pods.find((p) => p.node.name === name) as Pod;
    await eventually(
      'n1 routes n2 and n3 directly and n4 over VXLAN',
      () => {
        const routes = netplugRoutes(node('n1').netns);
        return (
          routes.includes(`${blockOf(on('n2'))} via ${node('n2').address} dev eth0`) &&
          routes.includes(`${blockOf(on('n3'))} via ${node('n3').address} dev eth0`) &&
          routes.some((r) => r.startsWith(`${blockOf(on('n4'))} via 10.246.`) && r.endsWith('dev vxlan.netplug onlink'))
        );
      },
      { timeoutMs: 90_000 },
    ).catch((err: Error) => {
      throw new Error(`${err.message}; routes ${JSON.stringify(netplugRoutes(node('n1').netns))}; log: ${node('n1').log().slice(-2000)}`);
    });
    let pairs = 0;
    for (const from of pods)
      for (const to of pods) {
        if (from.node === to.node) continue;
        await eventually(
          `${from.node.name} pings ${to.node.name}`,
          () => topology.exec(from.netns, ['ping', '-c', '1', '-W', '1', to.address]).status === 0,
        );
        pairs++;
      }
    t.is(pairs, 12);
    // The pool's own IPAM holds the tunnel addresses, under the reference's handle names.
    const handles = await store.listKeys(keys.handles);
    for (const name of ['n1', 'n2', 'n3', 'n4']) t.true(handles.includes(keys.handle(`vxlan-tunnel-addr-${name}`)), name);
    const pool = await store.get<PoolResource>(keys.pool(POOL));
    t.is(pool?.value.spec.vxlanMode, 'CrossSubnet');
  },
);
