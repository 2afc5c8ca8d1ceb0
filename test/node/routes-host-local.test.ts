// Routes between nodes of a host-local install (USE_POD_CIDR=true, the Kubernetes datastore, no
// pool): three "nodes" as in routes.test.ts (n1 and n2 on one subnet, n3 behind a router), each a
// Kubernetes Node with spec.podCIDRs and the built netplug-node in its namespace with exactly the
// ClusterRoles the host-local manifest ships for it; pods made by the built CNI plugin with
// host-local IPAM in their node's pod CIDR. Same-subnet nodes route each other's pod CIDR directly
// and their pods ping each other; the node on the other subnet is left to the underlay (no pool
// says how to reach it). A Node deleted loses its route everywhere; made again with another pod
// CIDR, it is routed by that one.
import { join } from 'node:path';

import test from 'ava';
import { PatchStrategy, setHeaderOptions, type V1PolicyRule } from '@kubernetes/client-node';

import { CNI_PLUGIN, NODE, type RenderOptions } from '../../ts/render/objects.ts';
import { renderPodCidrRbac } from '../../ts/render/pod-cidr-rbac.ts';
import { renderRbac } from '../../ts/render/rbac.ts';
import { NODE_ADDRESS_ANNOTATIONS } from '../../ts/store/kubernetes/resources.ts';
import { requireBuilt } from '../helpers/cni.ts';
import { requireRoot } from '../helpers/kernel.ts';
import { installCrds, removeIpamLockFileAfter, startKube, type Kube } from '../helpers/kube.ts';
import { makeTopology, netplugRoutes, type Pod, type TestNode, type Topology } from '../helpers/nodes.ts';
import { eventually } from '../helpers/eventually.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

const shared = sharedTeardowns(test);
/** Each node's pod CIDR, as the controller-manager would assign it; changed by the last test. */
const podCidrs = new Map([
  ['n1', '10.250.1.0/24'],
  ['n2', '10.250.2.0/24'],
  ['n3', '10.250.3.0/24'],
]);
let kube: Kube;
let topology: Topology;
let pods: Pod[] = [];

/** The rules of the ClusterRoles the host-local manifest binds netplug-node to (its own, the plugin's, the pod CIDRs' one). */
function shippedRules(): V1PolicyRule[] {
  const options: RenderOptions = { datastore: 'kubernetes', namespace: 'kube-system', image: 'netplug:test', ipam: 'host-local' };
  const roles = [...renderRbac(options), ...renderPodCidrRbac(options, true)].filter(
    (object) => object.kind === 'ClusterRole' && [NODE, CNI_PLUGIN, `${NODE}-pod-cidrs`].includes(object.metadata.name),
  ) as unknown as { rules: V1PolicyRule[] }[];
  if (roles.length !== 3) throw new Error(`${roles.length} of netplug-node's 3 ClusterRoles in the manifest`);
  return roles.flatMap((role) => role.rules);
}

const createNode = (name: string) =>
  kube.core.createNode({
    body: { metadata: { name, labels: { 'kubernetes.io/hostname': name } }, spec: { podCIDRs: [podCidrs.get(name) as string] } },
  });

test.before(async () => {
  requireRoot();
  requireBuilt();
  removeIpamLockFileAfter(shared);
  kube = await startKube(shared);
  await installCrds(kube);
  const names = [...podCidrs.keys()];
  for (const name of names) await createNode(name);
  const agent = await kube.identityWith('netplug-node-routes-host-local', shippedRules());
  const port = Number(new URL(kube.server.url).port);
  topology = await makeTopology(shared, {
    nodes: names.map((name) => ({ name, subnet: name === 'n3' ? 2 : 1 })),
    ports: [port],
    datastoreNetconf: { datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } },
    // host-local in the node's pod CIDR, its state under the node's directory (the nodes share one file system).
    ipam: (node) => ({ type: 'host-local', subnet: podCidrs.get(node.name), dataDir: join(node.varDir, 'host-local') }),
    // An hour's refresh: every change the agents make comes from the Kubernetes API's watch.
    agentEnv: { DATASTORE_TYPE: 'kubernetes', KUBECONFIG: agent.kubeconfig, USE_POD_CIDR: 'true', NETPLUG_ROUTE_REFRESH_INTERVAL: '3600' },
  });
  for (const node of topology.nodes) node.startAgent();
  pods = topology.nodes.map((node) => topology.addPod(node));
});

const node = (name: string) => topology.nodes.find((n) => n.name === name) as TestNode;
const podOn = (name: string) => pods.find((p) => p.node.name === name) as Pod;

async function routesBecome(on: TestNode, wanted: string[]): Promise<void> {
  await eventually(
    `${on.name}'s netplug routes are ${JSON.stringify(wanted)}`,
    () => JSON.stringify(netplugRoutes(on.netns)) === JSON.stringify([...wanted].sort()),
    { timeoutMs: 90_000 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; they are ${JSON.stringify(netplugRoutes(on.netns))}; log: ${on.log().slice(-2000)}`);
  });
}

const pings = (from: Pod, to: Pod) => topology.exec(from.netns, ['ping', '-c', '1', '-W', '1', to.address]).status === 0;

test.serial(
  "same-subnet nodes route each other's pod CIDR directly and their pods ping each other; the other subnet is left to the underlay",
  async (t) => {
    t.true(podOn('n1').address.startsWith('10.250.1.'), podOn('n1').address);
    await routesBecome(node('n1'), [`10.250.2.0/24 via ${node('n2').address} dev eth0`]);
    await routesBecome(node('n2'), [`10.250.1.0/24 via ${node('n1').address} dev eth0`]);
    for (const [from, to] of [
      ['n1', 'n2'],
      ['n2', 'n1'],
    ] as const)
      await eventually(`a pod on ${from} pings one on ${to}`, () => pings(podOn(from), podOn(to)));
    // n3 is on the other subnet: no route either way, and the agents say why.
    t.deepEqual(netplugRoutes(node('n3').netns), []);
    await eventually('n1 says why n3 is not routed', () =>
      node('n1').log().includes('node "n3" (172.30.2.3/24) is not on this node\'s subnet and no pool holds it: 10.250.3.0/24'),
    );
  },
);

test.serial("a Node deleted loses its pod CIDR's route; made again with another pod CIDR, it is routed by that one", async (t) => {
  await kube.core.deleteNode({ name: 'n2' });
  await routesBecome(node('n1'), []);
  t.false(pings(podOn('n1'), podOn('n2')));

  // As a cluster does with a node that comes back: a new Node, a new pod CIDR. Its address is
  // annotated here as n2's agent publishes it (the agent does so too, after its retry's delay):
  // what this test is about is n1 routing the new pod CIDR.
  podCidrs.set('n2', '10.250.12.0/24');
  await createNode('n2');
  await kube.core.patchNode(
    { name: 'n2', body: { metadata: { annotations: { [NODE_ADDRESS_ANNOTATIONS.ipv4Address]: `${node('n2').address}/24` } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  await routesBecome(node('n1'), [`10.250.12.0/24 via ${node('n2').address} dev eth0`]);
  const moved = topology.addPod(node('n2'));
  t.teardown(() => topology.deletePod(moved));
  t.true(moved.address.startsWith('10.250.12.'), moved.address);
  await eventually('a pod on n1 pings the new pod on n2', () => pings(podOn('n1'), moved));
});
