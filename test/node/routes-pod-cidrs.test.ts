// Host-local installs route by each Node's spec.podCIDRs (pure: no kernel, no datastore): the
// Kubernetes datastore's Node carries them, the cluster read keeps them per node, and the routes
// computed with USE_POD_CIDR route each other node's IPv4 pod CIDR as a block affine to it (direct
// on the same subnet, else as the pool holding it says); IPv6 ones only with an IPv6 node address
// (IP6, none here: routes-ipv6-desired.test.ts). Node a is the local node at 10.0.0.1/24; b shares
// its subnet, c is on 10.1.0.0/24.
import test from 'ava';

import type { EncapsulationMode } from '../../ts/model/ip-pool.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { kernelState } from '../../ts/node/routes/kernel-state.ts';
import type { NodeAddress } from '../../ts/node/shared/node-address.ts';
import { clusterStateOf } from '../../ts/node/shared/read-cluster.ts';
import { type KubeObject, nodeEntry } from '../../ts/store/kubernetes/documents.ts';
import { NODE_ADDRESS_ANNOTATIONS } from '../../ts/store/kubernetes/resources.ts';
import type { Entry } from '../../ts/store/store.ts';

const local: NodeAddress = { address: '10.0.0.1', prefixLength: 24, interface: 'eth0', source: 'IP' };

/** A Kubernetes Node as the API serves it: its published address as an annotation, its pod CIDRs in spec. */
function kubeNode(name: string, address: string, spec: Record<string, unknown>, extra: Record<string, string> = {}): KubeObject {
  return {
    metadata: { name, resourceVersion: '1', annotations: { [NODE_ADDRESS_ANNOTATIONS.ipv4Address]: address, ...extra } },
    spec,
  };
}

const NODES = {
  a: kubeNode('a', '10.0.0.1/24', { podCIDRs: ['10.244.0.0/24', 'fd00:0:0:0::/64'] }),
  b: kubeNode('b', '10.0.0.2/24', { podCIDRs: ['10.244.1.0/24', 'FD00:0000:0:1::/64'] }),
  c: kubeNode('c', '10.1.0.3/24', { podCIDRs: ['10.244.2.0/24'] }),
};

function pool(ipipMode: EncapsulationMode, vxlanMode: EncapsulationMode): Entry<unknown> {
  const value = poolResource('p', { cidr: '10.244.0.0/16' }, new Date());
  return { key: keys.pool('p'), revision: '1', value: { ...value, spec: { ...value.spec, ipipMode, vxlanMode } } };
}

/** The routes node a programs, as `dst via gw dev d [onlink]`, with its notes. */
function routesOf(nodes: KubeObject[], options: { podCidrs?: boolean; pools?: Entry<unknown>[] } = {}) {
  const cluster = clusterStateOf(nodes.map(nodeEntry), [], options.pools ?? []);
  const state = kernelState(cluster, 'a', local, options.podCidrs ?? true);
  return {
    routes: state.routes.routes.map(({ dst, via, dev, onlink }) => `${dst} via ${via} dev ${dev}${onlink ? ' onlink' : ''}`),
    notes: state.notes,
  };
}

test("a Kubernetes Node's spec.podCIDRs (else spec.podCIDR) are its entry's status.podCIDRs, read back per node in canonical form", (t) => {
  t.deepEqual((nodeEntry(NODES.b).value as { status: unknown }).status, { podCIDRs: ['10.244.1.0/24', 'FD00:0000:0:1::/64'] });
  t.deepEqual((nodeEntry(kubeNode('d', '10.0.0.4/24', { podCIDR: '10.244.3.0/24' })).value as { status: unknown }).status, {
    podCIDRs: ['10.244.3.0/24'],
  });
  t.false('status' in (nodeEntry(kubeNode('e', '10.0.0.5/24', {})).value as object), 'no pod CIDRs, no status');
  const cluster = clusterStateOf([nodeEntry(NODES.b)], [], []);
  t.deepEqual(cluster.nodes[0]?.podCidrs, ['10.244.1.0/24', 'fd00:0:0:1::/64']);
});

test("a broken status.podCIDRs is named, and costs the node only its pod CIDRs' routes", (t) => {
  const entry = nodeEntry(NODES.b);
  const broken = { ...entry, value: { ...(entry.value as object), status: { podCIDRs: ['10.244.1.0/24', 'nonsense'] } } };
  const cluster = clusterStateOf([broken], [], []);
  t.is(cluster.nodes.length, 1);
  t.is(cluster.nodes[0]?.podCidrs, undefined);
  t.regex(cluster.broken.join(), /status\.podCIDRs.*must be a list of CIDRs/);
});

test("USE_POD_CIDR: each other node's IPv4 pod CIDR via it, directly on the same subnet; the other subnet is left to the underlay, with a note", (t) => {
  const { routes, notes } = routesOf(Object.values(NODES));
  t.deepEqual(routes, ['10.244.1.0/24 via 10.0.0.2 dev eth0']);
  t.deepEqual(notes, [
    'node "c" (10.1.0.3/24) is not on this node\'s subnet and no pool holds it: 10.244.2.0/24 is left to the underlay\'s routing',
    "this node has no IPv6 address (IP6 is none): other nodes' IPv6 blocks are not routed",
  ]);
});

test('without USE_POD_CIDR the pod CIDRs are not routed (a netplug-ipam install routes its blocks alone)', (t) => {
  t.deepEqual(routesOf(Object.values(NODES), { podCidrs: false }).routes, []);
});

test('the pool holding the pod CIDRs decides as for blocks: CrossSubnet sends the other subnet through tunl0 or over VXLAN', (t) => {
  t.deepEqual(routesOf(Object.values(NODES), { pools: [pool('CrossSubnet', 'Never')] }).routes, [
    '10.244.1.0/24 via 10.0.0.2 dev eth0',
    '10.244.2.0/24 via 10.1.0.3 dev tunl0 onlink',
  ]);
  // The default pool's encapsulation, VXLAN CrossSubnet: the same subnet direct, the other over VXLAN.
  const vxlan = kubeNode('c', '10.1.0.3/24', NODES.c.spec as Record<string, unknown>, {
    [NODE_ADDRESS_ANNOTATIONS.ipv4VXLANTunnelAddr]: '10.244.200.1',
    [NODE_ADDRESS_ANNOTATIONS.vxlanTunnelMACAddr]: '66:00:00:00:00:0c',
  });
  t.deepEqual(routesOf([NODES.a, NODES.b, vxlan], { pools: [pool('Never', 'CrossSubnet')] }).routes, [
    '10.244.1.0/24 via 10.0.0.2 dev eth0',
    '10.244.2.0/24 via 10.244.200.1 dev vxlan.netplug onlink',
  ]);
});

test("a node gone loses its pod CIDRs' routes; a node whose pod CIDRs changed is routed by the new ones", (t) => {
  t.deepEqual(routesOf([NODES.a, NODES.c]).routes, []);
  const moved = kubeNode('b', '10.0.0.2/24', { podCIDRs: ['10.244.9.0/24'] });
  t.deepEqual(routesOf([NODES.a, moved]).routes, ['10.244.9.0/24 via 10.0.0.2 dev eth0']);
  const unpublished = { ...NODES.b, metadata: { ...NODES.b.metadata, annotations: {} } };
  t.deepEqual(routesOf([NODES.a, unpublished]), {
    routes: [],
    notes: [
      'node "b" has not published its address: 10.244.1.0/24 is not routed',
      "this node has no IPv6 address (IP6 is none): other nodes' IPv6 blocks are not routed",
    ],
  });
});
