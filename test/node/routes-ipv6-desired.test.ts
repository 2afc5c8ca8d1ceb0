// The desired IPv6 routes of one node (pure: no kernel, no datastore). Node a is the local node at
// 10.0.0.1/24 and fd00:30:1::1/64; b shares both subnets, c is on another IPv6 subnet, d has
// published no IPv6 address. IPv6 VXLAN tunnel addresses are fd00:245::<node>.
import test from 'ava';

import type { EncapsulationMode } from '../../ts/model/ip-pool.ts';
import { parsePrefix, type Prefix } from '../../ts/net/cidr.ts';
import type { Pool } from '../../ts/ipam/pools.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { overheadOfPoolEntries } from '../../ts/node/shared/pod-mtu.ts';
import {
  desiredState,
  type LocalNode,
  type NodeAddresses,
  podCidrBlocks,
  type RoutedBlock,
  type RoutedWorkload,
} from '../../ts/node/routes/desired-routes.ts';

const local: LocalNode = {
  name: 'a',
  address: { address: '10.0.0.1', prefixLength: 24 },
  interface: 'eth0',
  ipipDevice: 'tunl0',
  vxlanDevice: 'vxlan.netplug',
  address6: { address: 'fd00:30:1::1', prefixLength: 64, interface: 'eth0' },
};
const nodes: NodeAddresses[] = [
  { name: 'a', address: { address: '10.0.0.1', prefixLength: 24 }, address6: { address: 'fd00:30:1::1', prefixLength: 64 } },
  { name: 'b', address: { address: '10.0.0.2', prefixLength: 24 }, address6: { address: 'fd00:30:1::2', prefixLength: 64 } },
  { name: 'c', address: { address: '10.0.0.3', prefixLength: 24 }, address6: { address: 'fd00:30:2::3', prefixLength: 64 } },
  { name: 'd', address: { address: '10.0.0.4', prefixLength: 24 } },
];
const blocks: RoutedBlock[] = [
  { cidr: '10.244.0.0/26', node: 'a', borrowed: [] },
  { cidr: '10.244.1.0/26', node: 'b', borrowed: [] },
  { cidr: 'fd00:244::/122', node: 'a', borrowed: [{ address: 'fd00:244::5', node: 'b' }] },
  { cidr: 'fd00:244::40/122', node: 'b', borrowed: [{ address: 'fd00:244::41', node: 'a' }] },
  { cidr: 'fd00:244::80/122', node: 'c', borrowed: [] },
  { cidr: 'fd00:244::c0/122', node: 'd', borrowed: [] },
];

function pools(ipipMode: EncapsulationMode = 'Never', vxlanMode: EncapsulationMode = 'Never'): Pool[] {
  const pool = (name: string, cidr: string, modes: { ipipMode: EncapsulationMode; vxlanMode: EncapsulationMode }): Pool => ({
    name,
    spec: { cidr, blockSize: cidr.includes(':') ? 122 : 26, nodeSelector: 'all()', natOutgoing: false, disabled: false, ...modes },
    prefix: parsePrefix(cidr) as Prefix,
  });
  return [pool('v4', '10.244.0.0/16', { ipipMode: 'Never', vxlanMode: 'Never' }), pool('v6', 'fd00:244::/48', { ipipMode, vxlanMode })];
}

const withVxlan6: LocalNode = { ...local, vxlanDevice6: 'vxlan6.netplug' };
/** The nodes with their IPv6 VXLAN tunnel addresses and MACs published. */
const vxlanNodes: NodeAddresses[] = nodes.map((node) =>
  node.address6 ? { ...node, vxlanTunnelAddr6: `fd00:245::${node.name}`, vxlanMac6: `66:00:00:00:06:0${node.name}` } : node,
);

const text = (state: ReturnType<typeof desiredState>) =>
  state.routes.map(({ dst, via, dev, onlink }) => `${dst} via ${via} dev ${dev}${onlink ? ' onlink' : ''}`);

test("IPv6 blocks go directly via a same-subnet node's IPv6 address; borrowed IPv6 addresses get /128 host routes", (t) => {
  const state = desiredState(local, nodes, blocks, pools());
  t.deepEqual(text(state), [
    '10.244.1.0/26 via 10.0.0.2 dev eth0',
    'fd00:244::40/122 via fd00:30:1::2 dev eth0',
    'fd00:244::5/128 via fd00:30:1::2 dev eth0',
  ]);
  t.deepEqual(state.notes, [
    'node "c" (fd00:30:2::3/64) is not on this node\'s IPv6 subnet: fd00:244::80/122 is left to the underlay\'s routing',
    'node "d" has not published an IPv6 address (its IP6): fd00:244::c0/122 is not routed',
  ]);
  t.true(state.routes.every((route) => route.kind === 'direct'));
});

test('a node removed, or a block released, loses its IPv6 routes', (t) => {
  const withoutB = desiredState(
    local,
    nodes.filter((node) => node.name !== 'b'),
    blocks,
    pools(),
  );
  t.false(text(withoutB).some((route) => route.includes('fd00:30:1::2')));
  const released = blocks.map((block) => (block.cidr === 'fd00:244::40/122' ? { ...block, node: undefined } : block));
  t.deepEqual(
    text(desiredState(local, nodes, released, pools())).filter((route) => route.startsWith('fd00')),
    ['fd00:244::5/128 via fd00:30:1::2 dev eth0'],
  );
});

test('this node without an IPv6 address (IP6 none) routes no IPv6 block, and says so once', (t) => {
  const { address6: _, ...v4Only } = local;
  const state = desiredState(v4Only, nodes, blocks, pools());
  t.deepEqual(text(state), ['10.244.1.0/26 via 10.0.0.2 dev eth0']);
  t.deepEqual(state.notes, ["this node has no IPv6 address (IP6 is none): other nodes' IPv6 blocks are not routed"]);
});

test("an IPv6 pool with VXLAN Always: via the nodes' IPv6 tunnel addresses on vxlan6.netplug, onlink, with IPv6 neighbour and FDB entries", (t) => {
  const state = desiredState(withVxlan6, vxlanNodes, blocks, pools('Never', 'Always'));
  t.deepEqual(text(state), [
    '10.244.1.0/26 via 10.0.0.2 dev eth0',
    'fd00:244::40/122 via fd00:245::b dev vxlan6.netplug onlink',
    'fd00:244::5/128 via fd00:245::b dev vxlan6.netplug onlink',
    'fd00:244::80/122 via fd00:245::c dev vxlan6.netplug onlink',
  ]);
  t.deepEqual(state.neighbors6, [
    { ip: 'fd00:245::b', mac: '66:00:00:00:06:0b' },
    { ip: 'fd00:245::c', mac: '66:00:00:00:06:0c' },
  ]);
  t.deepEqual(state.fdb6, [
    { mac: '66:00:00:00:06:0b', dst: 'fd00:30:1::2' },
    { mac: '66:00:00:00:06:0c', dst: 'fd00:30:2::3' },
  ]);
  t.deepEqual(state.neighbors, [], 'nothing on the IPv4 VXLAN device');
  t.deepEqual(state.notes, ['node "d" has not published an IPv6 address (its IP6): fd00:244::c0/122 is not routed']);
});

test('IPv6 VXLAN CrossSubnet: the same IPv6 subnet direct, the other over vxlan6.netplug; a node without its IPv6 tunnel address yet is not routed, with a note', (t) => {
  const state = desiredState(withVxlan6, vxlanNodes, blocks, pools('Never', 'CrossSubnet'));
  t.deepEqual(
    text(state).filter((route) => route.startsWith('fd00')),
    [
      'fd00:244::40/122 via fd00:30:1::2 dev eth0',
      'fd00:244::5/128 via fd00:30:1::2 dev eth0',
      'fd00:244::80/122 via fd00:245::c dev vxlan6.netplug onlink',
    ],
  );
  t.deepEqual(state.fdb6, [{ mac: '66:00:00:00:06:0c', dst: 'fd00:30:2::3' }]);
  const early = desiredState(withVxlan6, nodes, blocks, pools('Never', 'Always'));
  t.false(early.routes.some((route) => route.dev === 'vxlan6.netplug'));
  t.true(early.notes.includes('node "b" has no IPv6 VXLAN tunnel address and MAC yet: fd00:244::40/122 (pool "v6") is not routed'));
});

test('an IPv6 pool asking for IP-in-IP (which has no IPv6 form) is routed as without it, with a note', (t) => {
  const state = desiredState(local, nodes, blocks, pools('Always'));
  t.true(text(state).includes('fd00:244::40/122 via fd00:30:1::2 dev eth0'));
  t.false(state.routes.some((route) => route.kind === 'ipip'));
  t.true(state.notes.includes('pool "v6" asks for IP-in-IP, which has no IPv6 form: its blocks are routed as without it'));
});

test("host-local: a node's IPv6 pod CIDR is routed like an IPv6 block", (t) => {
  const dual = nodes.map((node) => (node.name === 'b' ? { ...node, podCidrs: ['10.245.1.0/24', 'fd00:245:1::/64'] } : node));
  t.deepEqual(text(desiredState(local, dual, podCidrBlocks(dual), [])), [
    '10.245.1.0/24 via 10.0.0.2 dev eth0',
    'fd00:245:1::/64 via fd00:30:1::2 dev eth0',
  ]);
});

test("pods' MTU: VXLAN over IPv6 takes 70 bytes (its outer header is IPv6's), over IPv4 50", (t) => {
  const entry = (name: string, cidr: string) => ({
    key: keys.pool(name),
    revision: '1',
    value: poolResource(name, { cidr, 'vxlan-mode': 'Always' }, new Date(0)),
  });
  t.is(overheadOfPoolEntries([entry('v4', '10.244.0.0/16')], true), 50);
  t.is(overheadOfPoolEntries([entry('v4', '10.244.0.0/16'), entry('v6', 'fd00:244::/48')], true), 70);
  t.is(overheadOfPoolEntries([entry('v6', 'fd00:244::/48')], false), 0, 'no routes programmed here: no encapsulation of its own');
});

test("IPv6 ipAddrsNoIpam addresses and floating IPs outside the blocks: a /128 to the pod's node in a pool without VXLAN; none in a VXLAN pool, noted", (t) => {
  const workload = (name: string, node: string, address: string, floating?: string): RoutedWorkload => ({
    name: `default/${name}`,
    node,
    addresses: [address],
    floatingIps: floating ? [{ internalIP: address, externalIP: floating }] : [],
  });
  const workloads = [
    workload('fixed', 'b', 'fd00:244:0:1::7'),
    workload('floating', 'b', 'fd00:244::42', 'fd00:244:0:2::9'),
    workload('in-own-block', 'c', 'fd00:244::85'),
    workload('far', 'c', 'fd00:244:0:1::8'),
    workload('outside', 'b', 'fd00:99::1'),
  ];
  const plain = desiredState(local, nodes, blocks, pools(), workloads);
  const hostRoutes = text(plain).filter((route) => route.split(' ')[0]?.endsWith('/128') && !route.startsWith('fd00:244::5/'));
  t.deepEqual(hostRoutes, ['fd00:244:0:1::7/128 via fd00:30:1::2 dev eth0', 'fd00:244:0:2::9/128 via fd00:30:1::2 dev eth0']);
  t.true(
    plain.notes.includes(
      'node "c" (fd00:30:2::3/64) is not on this node\'s IPv6 subnet: fd00:244:0:1::8/128 is left to the underlay\'s routing',
    ),
    JSON.stringify(plain.notes),
  );
  t.true(
    plain.notes.some((note) => note.startsWith('address fd00:99::1 of default/outside (node "b") is in no pool')),
    JSON.stringify(plain.notes),
  );

  const vxlan = desiredState(withVxlan6, vxlanNodes, blocks, pools('Never', 'Always'), workloads);
  t.false(
    text(vxlan).some((route) => route.startsWith('fd00:244:0:')),
    JSON.stringify(text(vxlan)),
  );
  t.true(
    vxlan.notes.some(
      (note) => note.includes('address fd00:244:0:1::7 of default/fixed (node "b")') && note.includes('in pool "v6", which uses VXLAN'),
    ),
    JSON.stringify(vxlan.notes),
  );
});
