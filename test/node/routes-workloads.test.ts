// Host routes to workload addresses outside the blocks (ipAddrsNoIpam's) and to floating IPs,
// computed from the cluster (pure: no kernel, no datastore). Routed to the workload's node only in
// a pool without VXLAN (direct on one subnet, IP-in-IP as the pool says); in a VXLAN pool or in no
// pool, noted and left alone. Where workloads come from: etcd's workload endpoints, the Kubernetes
// datastore's pods. Node a is the local node at 10.0.0.1/24; b shares its subnet, c is on
// 10.1.0.0/24.
import test from 'ava';

import type { Pool } from '../../ts/ipam/pools.ts';
import type { EncapsulationMode, PoolSpec } from '../../ts/model/ip-pool.ts';
import { keys } from '../../ts/model/keys.ts';
import { ANNOTATIONS } from '../../ts/model/pod-annotations.ts';
import { workloadEndpoint } from '../../ts/model/workload-endpoint.ts';
import { parsePrefix, type Prefix } from '../../ts/net/cidr.ts';
import { desiredState, type NodeAddresses, type RoutedBlock, type RoutedWorkload } from '../../ts/node/routes/desired-routes.ts';
import { clusterStateOf } from '../../ts/node/shared/read-cluster.ts';
import { workloadOf, type PodFields } from '../../ts/node/shared/workloads.ts';
import type { Entry } from '../../ts/store/store.ts';

const local = {
  name: 'a',
  address: { address: '10.0.0.1', prefixLength: 24 },
  interface: 'eth0',
  ipipDevice: 'tunl0',
  vxlanDevice: 'vxlan.netplug',
};
const nodes: NodeAddresses[] = [
  { name: 'a', address: { address: '10.0.0.1', prefixLength: 24 } },
  { name: 'b', address: { address: '10.0.0.2', prefixLength: 24 }, vxlanTunnelAddr: '10.244.1.1', vxlanMac: '66:00:00:00:00:0b' },
  { name: 'c', address: { address: '10.1.0.3', prefixLength: 24 } },
];
const blocks: RoutedBlock[] = [
  { cidr: '10.244.0.0/26', node: 'a', borrowed: [] },
  { cidr: '10.244.1.0/26', node: 'b', borrowed: [{ address: '10.244.1.9', node: 'c' }] },
];

function pool(name: string, cidr: string, ipipMode: EncapsulationMode, vxlanMode: EncapsulationMode): Pool {
  const spec: PoolSpec = { cidr, blockSize: 26, nodeSelector: 'all()', ipipMode, vxlanMode, natOutgoing: false, disabled: false };
  return { name, spec, prefix: parsePrefix(cidr) as Prefix };
}

const workload = (name: string, node: string, addresses: string[], floating: string[] = []): RoutedWorkload => ({
  name: `default/${name}`,
  node,
  addresses,
  floatingIps: floating.map((externalIP) => ({ internalIP: addresses[0] as string, externalIP })),
});

function routesOf(pools: Pool[], workloads: RoutedWorkload[]) {
  const state = desiredState(local, nodes, blocks, pools, workloads);
  return {
    routes: state.routes.map(({ dst, via, dev, onlink }) => `${dst} via ${via} dev ${dev}${onlink ? ' onlink' : ''}`),
    notes: state.notes,
  };
}

const blockRoutes = ['10.244.1.0/26 via 10.0.0.2 dev eth0'];
const borrowedNote = (pools: string) =>
  `node "c" (10.1.0.3/24) is not on this node's subnet and ${pools}: 10.244.1.9/32 is left to the underlay's routing`;

test('an ipAddrsNoIpam address in a pool without encapsulation: a host route to its node, direct on the same subnet', (t) => {
  const { routes, notes } = routesOf([pool('plain', '10.244.0.0/16', 'Never', 'Never')], [workload('fixed', 'b', ['10.244.7.7'])]);
  t.deepEqual(routes, [...blockRoutes, '10.244.7.7/32 via 10.0.0.2 dev eth0']);
  t.deepEqual(notes, [borrowedNote('pool "plain" uses no encapsulation')]);
});

test('an ipAddrsNoIpam address in an IP-in-IP pool: through the tunnel, to a node on another subnet too', (t) => {
  const pools = [pool('ipip', '10.244.0.0/16', 'Always', 'Never')];
  const { routes, notes } = routesOf(pools, [workload('fixed', 'b', ['10.244.7.7']), workload('far', 'c', ['10.244.8.8'])]);
  t.true(routes.includes('10.244.7.7/32 via 10.0.0.2 dev tunl0 onlink'), JSON.stringify(routes));
  t.true(routes.includes('10.244.8.8/32 via 10.1.0.3 dev tunl0 onlink'), JSON.stringify(routes));
  t.deepEqual(notes, []);
});

test('no route in a VXLAN pool (Always or CrossSubnet, even to a node on the same subnet), nor outside every pool; each noted once', (t) => {
  for (const mode of ['Always', 'CrossSubnet'] as const) {
    const pools = [pool('vx', '10.244.0.0/16', 'Never', mode)];
    const { routes, notes } = routesOf(pools, [workload('fixed', 'b', ['10.244.7.7'])]);
    t.false(
      routes.some((route) => route.startsWith('10.244.7.7/32')),
      mode,
    );
    t.true(
      notes.includes(
        'address 10.244.7.7 of default/fixed (node "b") is in pool "vx", which uses VXLAN: not routed to their node (routes go only to addresses in a pool without VXLAN; route them by other means)',
      ),
      JSON.stringify(notes),
    );
  }
  const { routes, notes } = routesOf(
    [pool('plain', '10.244.0.0/16', 'Never', 'Never')],
    ['1', '2', '3', '4', '5'].map((n) => workload(`outside-${n}`, 'b', [`192.168.9.${n}`])),
  );
  t.false(routes.some((route) => route.startsWith('192.168.')));
  t.true(
    notes.includes(
      'address 192.168.9.1 of default/outside-1 (node "b"), address 192.168.9.2 of default/outside-2 (node "b"), address 192.168.9.3 of default/outside-3 (node "b") and 2 more are in no pool: not routed to their node (routes go only to addresses in a pool without VXLAN; route them by other means)',
    ),
    JSON.stringify(notes),
  );
});

test('addresses a block already routes get no host route: its node’s own block, a borrowed one; this node’s workloads get none; nor an IPv6 address in no pool', (t) => {
  const pools = [pool('plain', '10.244.0.0/16', 'Never', 'Never')];
  const { routes } = routesOf(pools, [
    workload('in-own-block', 'b', ['10.244.1.5']),
    workload('borrower', 'c', ['10.244.1.9']),
    workload('local', 'a', ['10.244.9.9']),
    workload('v6', 'b', ['fd00::5']),
  ]);
  t.deepEqual(routes, blockRoutes);
  // An address chosen inside another node's block is routed to where the pod is: the /32 wins.
  const inOther = routesOf(pools, [workload('in-a-block-of-b', 'c', ['10.244.1.20'])]);
  t.false(inOther.routes.includes('10.244.1.20/32 via 10.1.0.3 dev eth0'));
  t.true(inOther.notes.some((note) => note.includes('10.244.1.20/32 is left to the underlay')));
  const sameSubnet = routesOf(pools, [workload('in-a-block-of-a', 'b', ['10.244.0.20'])]);
  t.true(sameSubnet.routes.includes('10.244.0.20/32 via 10.0.0.2 dev eth0'));
});

test("a remote pod's floating IP in a pool without VXLAN is routed to the pod's node; a local pod's is not (NAT takes it here)", (t) => {
  const pools = [pool('plain', '10.244.0.0/16', 'Never', 'Never'), pool('floating', '10.250.0.0/24', 'Never', 'Never')];
  const { routes } = routesOf(pools, [
    workload('remote', 'b', ['10.244.1.5'], ['10.250.0.1']),
    workload('here', 'a', ['10.244.0.5'], ['10.250.0.2']),
  ]);
  t.deepEqual(routes, [...blockRoutes, '10.250.0.1/32 via 10.0.0.2 dev eth0']);
  const vxlan = routesOf([pool('vx', '10.250.0.0/24', 'Never', 'Always')], [workload('remote', 'b', ['10.244.1.5'], ['10.250.0.1'])]);
  t.false(vxlan.routes.some((route) => route.startsWith('10.250.0.1')));
  t.true(
    vxlan.notes.some((note) => note.startsWith('floating IP 10.250.0.1 of default/remote (node "b") is in pool "vx", which uses VXLAN')),
  );
});

const endpointEntry = (spec: Record<string, unknown>): Entry<unknown> => {
  const value = workloadEndpoint('default', {
    orchestrator: 'k8s',
    workload: '',
    node: 'b',
    containerID: 'c1',
    pod: 'p',
    endpoint: 'eth0',
    interfaceName: 'cali1',
    mac: '0a:58:0a:f4:07:07',
    ipNetworks: ['10.244.7.7/32', 'fd00::7/128'],
    profiles: [],
    ...spec,
  });
  return { key: keys.workloadEndpoint('default', value.metadata.name), value, revision: '1' };
};

test('a workload endpoint (etcd) gives its node, addresses and floating IPs; a broken one is named with its field and costs only itself', (t) => {
  t.deepEqual(workloadOf(endpointEntry({ ipNATs: [{ internalIP: '10.244.7.7', externalIP: '10.250.0.1' }] })), {
    name: 'default/p',
    node: 'b',
    addresses: ['10.244.7.7', 'fd00::7'],
    floatingIps: [{ internalIP: '10.244.7.7', externalIP: '10.250.0.1' }],
  });
  const broken = endpointEntry({ ipNetworks: ['not a cidr'] });
  const cluster = clusterStateOf([], [], [], [broken, endpointEntry({ pod: 'q' })]);
  t.deepEqual(
    cluster.workloads.map((w) => w.name),
    ['default/q'],
  );
  t.deepEqual(cluster.broken, [`workload endpoint ${broken.key}: spec.ipNetworks must be a list of CIDRs, not ["not a cidr"]`]);
  t.throws(() => workloadOf(endpointEntry({ ipNATs: [{ internalIP: '10.244.7.7', externalIP: 'x' }] })), {
    message: /spec\.ipNATs must be a list of \{internalIP, externalIP\} addresses/,
  });
});

const podEntry = (pod: PodFields): Entry<unknown> => ({
  key: `${keys.workloadEndpoints}default/p`,
  value: { kind: 'Pod', ...pod },
  revision: '1',
});
const running = (annotations: Record<string, string> = {}, extra: Partial<PodFields> = {}): PodFields => ({
  metadata: { name: 'p', namespace: 'default', annotations },
  spec: { nodeName: 'b' },
  status: { phase: 'Running', podIPs: [{ ip: '10.244.7.7' }, { ip: 'fd00::7' }] },
  ...extra,
});

test('a pod (the Kubernetes datastore) gives its node, status.podIPs and the floatingIPs annotation paired by family', (t) => {
  const floating = JSON.stringify(['10.250.0.1', 'fd00:250::1']);
  t.deepEqual(workloadOf(podEntry(running({ [ANNOTATIONS.floatingIPs]: floating }))), {
    name: 'default/p',
    node: 'b',
    addresses: ['10.244.7.7', 'fd00::7'],
    floatingIps: [
      { internalIP: '10.244.7.7', externalIP: '10.250.0.1' },
      { internalIP: 'fd00::7', externalIP: 'fd00:250::1' },
    ],
  });
  // A family the pod lacks is skipped, as on the endpoint the plugin writes.
  const v4only = running({ [ANNOTATIONS.floatingIPs]: floating }, { status: { phase: 'Running', podIPs: [{ ip: '10.244.7.7' }] } });
  t.deepEqual(workloadOf(podEntry(v4only))?.floatingIps, [{ internalIP: '10.244.7.7', externalIP: '10.250.0.1' }]);
  for (const [why, pod] of [
    ['not scheduled', running({}, { spec: {} })],
    ['no address yet', running({}, { status: { phase: 'Pending' } })],
    ['finished', running({}, { status: { phase: 'Succeeded', podIPs: [{ ip: '10.244.7.7' }] } })],
    ['host network', running({}, { spec: { nodeName: 'b', hostNetwork: true } })],
  ] as const)
    t.is(workloadOf(podEntry(pod)), undefined, why);
  t.throws(() => workloadOf(podEntry(running({ [ANNOTATIONS.floatingIPs]: '10.250.0.1' }))), {
    message: `pod default/p: annotation "${ANNOTATIONS.floatingIPs}" "10.250.0.1" is not JSON: write a JSON array of IP addresses`,
  });
});
