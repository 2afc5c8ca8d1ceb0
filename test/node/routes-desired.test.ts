// The desired routes of one node, computed from the datastore's nodes, blocks and pools, in every
// encapsulation mode (pure: no kernel, no datastore). Node a is the local node at 10.0.0.1/24;
// b shares its subnet, c is on 10.1.0.0/24.
import test from 'ava';

import type { EncapsulationMode, PoolSpec } from '../../ts/model/ip-pool.ts';
import { checkedNodeSpec } from '../../ts/model/checked-documents.ts';
import { parsePrefix, type Prefix } from '../../ts/net/cidr.ts';
import type { Pool } from '../../ts/ipam/pools.ts';
import { countsOf, desiredState, type NodeAddresses, type RoutedBlock } from '../../ts/node/routes/desired-routes.ts';
import { natOutgoingPart, natOutgoingRules } from '../../ts/node/nat/nat-outgoing.ts';
import { nodeAddress, parseAddressSetting } from '../../ts/node/shared/node-address.ts';
import { nodeSettings } from '../../ts/node/shared/settings.ts';

const local = {
  name: 'a',
  address: { address: '10.0.0.1', prefixLength: 24 },
  interface: 'eth0',
  ipipDevice: 'tunl0',
  vxlanDevice: 'vxlan.netplug',
};
const nodes: NodeAddresses[] = [
  {
    name: 'a',
    address: { address: '10.0.0.1', prefixLength: 24 },
    ipipTunnelAddr: '10.244.0.0',
    vxlanTunnelAddr: '10.244.0.1',
    vxlanMac: '66:00:00:00:00:0a',
  },
  {
    name: 'b',
    address: { address: '10.0.0.2', prefixLength: 24 },
    ipipTunnelAddr: '10.244.1.0',
    vxlanTunnelAddr: '10.244.1.1',
    vxlanMac: '66:00:00:00:00:0b',
  },
  {
    name: 'c',
    address: { address: '10.1.0.3', prefixLength: 24 },
    ipipTunnelAddr: '10.244.2.0',
    vxlanTunnelAddr: '10.244.2.1',
    vxlanMac: '66:00:00:00:00:0c',
  },
];
const blocks: RoutedBlock[] = [
  { cidr: '10.244.0.0/26', node: 'a', borrowed: [] },
  { cidr: '10.244.1.0/26', node: 'b', borrowed: [] },
  { cidr: '10.244.2.0/26', node: 'c', borrowed: [] },
];

function pool(ipipMode: EncapsulationMode, vxlanMode: EncapsulationMode, extra: Partial<PoolSpec> = {}, cidr = '10.244.0.0/16'): Pool {
  const spec: PoolSpec = { cidr, blockSize: 26, nodeSelector: 'all()', ipipMode, vxlanMode, natOutgoing: false, disabled: false, ...extra };
  return { name: `p-${ipipMode}-${vxlanMode}`, spec, prefix: parsePrefix(cidr) as Prefix };
}

const routesOf = (ipip: EncapsulationMode, vxlan: EncapsulationMode) =>
  desiredState(local, nodes, blocks, [pool(ipip, vxlan)]).routes.map(
    ({ dst, via, dev, onlink }) => `${dst} via ${via} dev ${dev}${onlink ? ' onlink' : ''}`,
  );

test('encapsulation Never: direct via a same-subnet node; a node on another subnet is left to the underlay, with a note', (t) => {
  t.deepEqual(routesOf('Never', 'Never'), ['10.244.1.0/26 via 10.0.0.2 dev eth0']);
  const state = desiredState(local, nodes, blocks, [pool('Never', 'Never')]);
  t.is(state.notes.length, 1);
  t.regex(state.notes[0] ?? '', /node "c" \(10\.1\.0\.3\/24\) is not on this node's subnet .* 10\.244\.2\.0\/26 is left to the underlay/);
  t.deepEqual(state.neighbors, []);
  t.deepEqual(state.fdb, []);
});

test("IPIP Always: every other node's block via its underlay address on tunl0, onlink; none to the local node's own", (t) => {
  t.deepEqual(routesOf('Always', 'Never'), ['10.244.1.0/26 via 10.0.0.2 dev tunl0 onlink', '10.244.2.0/26 via 10.1.0.3 dev tunl0 onlink']);
});

test('IPIP CrossSubnet: same-subnet nodes direct, the others through tunl0', (t) => {
  t.deepEqual(routesOf('CrossSubnet', 'Never'), ['10.244.1.0/26 via 10.0.0.2 dev eth0', '10.244.2.0/26 via 10.1.0.3 dev tunl0 onlink']);
});

test('VXLAN Always: via the remote VXLAN tunnel address, onlink, with its neighbour (address → MAC) and FDB (MAC → node) entries', (t) => {
  t.deepEqual(routesOf('Never', 'Always'), [
    '10.244.1.0/26 via 10.244.1.1 dev vxlan.netplug onlink',
    '10.244.2.0/26 via 10.244.2.1 dev vxlan.netplug onlink',
  ]);
  const state = desiredState(local, nodes, blocks, [pool('Never', 'Always')]);
  t.deepEqual(state.neighbors, [
    { ip: '10.244.1.1', mac: '66:00:00:00:00:0b' },
    { ip: '10.244.2.1', mac: '66:00:00:00:00:0c' },
  ]);
  t.deepEqual(state.fdb, [
    { mac: '66:00:00:00:00:0b', dst: '10.0.0.2' },
    { mac: '66:00:00:00:00:0c', dst: '10.1.0.3' },
  ]);
  t.deepEqual(countsOf(state), { direct: 0, ipip: 0, vxlan: 2 });
});

test('VXLAN CrossSubnet: same-subnet nodes direct, the others over VXLAN (only those get neighbour and FDB entries)', (t) => {
  t.deepEqual(routesOf('Never', 'CrossSubnet'), [
    '10.244.1.0/26 via 10.0.0.2 dev eth0',
    '10.244.2.0/26 via 10.244.2.1 dev vxlan.netplug onlink',
  ]);
  const state = desiredState(local, nodes, blocks, [pool('Never', 'CrossSubnet')]);
  t.deepEqual(state.fdb, [{ mac: '66:00:00:00:00:0c', dst: '10.1.0.3' }]);
});

test('each block follows its own pool; a node without addresses, a removed node and an unaffine block get no route', (t) => {
  const pools = [pool('Always', 'Never', {}, '10.244.0.0/16'), pool('Never', 'Never', {}, '10.96.0.0/16')];
  const more: RoutedBlock[] = [
    ...blocks,
    { cidr: '10.96.1.0/26', node: 'b', borrowed: [] },
    { cidr: '10.244.3.0/26', node: 'gone', borrowed: [] },
    { cidr: '10.244.4.0/26', node: undefined, borrowed: [] },
    { cidr: '10.244.5.0/26', node: 'd', borrowed: [] },
  ];
  const state = desiredState(local, [...nodes, { name: 'd' }], more, pools);
  t.deepEqual(
    state.routes.map((r) => `${r.dst} ${r.kind}`),
    ['10.244.1.0/26 ipip', '10.244.2.0/26 ipip', '10.96.1.0/26 direct'],
  );
  t.deepEqual(state.notes, ['node "d" has not published its address: 10.244.5.0/26 is not routed']);
});

test('VXLAN wanted but the node has not published its tunnel address yet: no route, and a note', (t) => {
  const state = desiredState(
    local,
    [nodes[0] as NodeAddresses, { name: 'b', address: { address: '10.0.0.2', prefixLength: 24 } }],
    blocks,
    [pool('Never', 'Always')],
  );
  t.deepEqual(state.routes, []);
  t.regex(state.notes[0] ?? '', /node "b" has no VXLAN tunnel address and MAC yet/);
});

test("borrowed addresses get a host route to the borrower, also in the local node's own blocks; the local node's own borrowed ones none", (t) => {
  const withBorrowed: RoutedBlock[] = [
    { cidr: '10.244.0.0/26', node: 'a', borrowed: [{ address: '10.244.0.9', node: 'b' }] },
    {
      cidr: '10.244.1.0/26',
      node: 'b',
      borrowed: [
        { address: '10.244.1.7', node: 'c' },
        { address: '10.244.1.8', node: 'a' },
      ],
    },
  ];
  const state = desiredState(local, nodes, withBorrowed, [pool('Always', 'Never')]);
  t.deepEqual(
    state.routes.map((r) => `${r.dst} via ${r.via}`),
    ['10.244.0.9/32 via 10.0.0.2', '10.244.1.0/26 via 10.0.0.2', '10.244.1.7/32 via 10.1.0.3'],
  );
});

test('natOutgoing: destinations in any pool return, sources in enabled natOutgoing pools are masqueraded; none asked, no rules', (t) => {
  const pools = [
    pool('Never', 'Never', { natOutgoing: true }, '10.244.0.0/16'),
    pool('Never', 'Never', { natOutgoing: false }, '10.96.0.0/16'),
    pool('Never', 'Never', { natOutgoing: true, disabled: true }, '10.97.0.0/16'),
  ];
  t.deepEqual(natOutgoingRules(pools), [
    'ip daddr 10.244.0.0/16 return comment "pool p-Never-Never"',
    'ip daddr 10.96.0.0/16 return comment "pool p-Never-Never"',
    'ip daddr 10.97.0.0/16 return comment "pool p-Never-Never"',
    'ip saddr 10.244.0.0/16 masquerade comment "natOutgoing of pool p-Never-Never"',
  ]);
  t.deepEqual(natOutgoingRules([pools[1] as Pool]), []);
  t.deepEqual(natOutgoingPart([pools[1] as Pool]), {}, 'no pool asks: no chain');
});

test('natOutgoing: IPv6 pools are masqueraded the same way, in the same nat chain at srcnat + 10', (t) => {
  const pools = [
    pool('Never', 'Never', { natOutgoing: true }, '10.244.0.0/16'),
    pool('Never', 'Never', { natOutgoing: true }, 'fd00:244::/48'),
  ];
  t.deepEqual(natOutgoingRules(pools), [
    'ip daddr 10.244.0.0/16 return comment "pool p-Never-Never"',
    'ip6 daddr fd00:244::/48 return comment "pool p-Never-Never"',
    'ip saddr 10.244.0.0/16 masquerade comment "natOutgoing of pool p-Never-Never"',
    'ip6 saddr fd00:244::/48 masquerade comment "natOutgoing of pool p-Never-Never"',
  ]);
  const [chain] = natOutgoingPart(pools).chains ?? [];
  t.deepEqual(chain?.base, { type: 'nat', hook: 'postrouting', priority: 110 });
});

test('IP: autodetect (the default) or an IPv4 address with its prefix length; anything else is refused naming it', (t) => {
  t.deepEqual(nodeSettings({ NODENAME: 'n1' }).nodeAddress, { autodetect: true });
  t.deepEqual(nodeSettings({ NODENAME: 'n1', IP: '10.0.0.5/24' }).nodeAddress, { address: '10.0.0.5', prefixLength: 24 });
  for (const bad of ['10.0.0.5', 'fd00::1/64', '10.0.0.5/33', 'eth0', '10.0.0.5/0'])
    t.throws(() => nodeSettings({ NODENAME: 'n1', IP: bad }), {
      message: `IP "${bad}" must be autodetect or an IPv4 address with its prefix length, such as 10.0.0.5/24`,
    });
  t.throws(() => nodeSettings({ NODENAME: 'n1', NETPLUG_NETWORKING_BACKEND: 'bird' }), {
    message: 'NETPLUG_NETWORKING_BACKEND "bird" must be routes or none',
  });
  t.false(nodeSettings({ NODENAME: 'n1', NETPLUG_NETWORKING_BACKEND: 'none' }).routes);
});

test('NETPLUG_ROUTE_REFRESH_INTERVAL: seconds, 30 by default; anything else is refused naming it', (t) => {
  t.is(nodeSettings({ NODENAME: 'n1' }).routeRefreshMs, 30_000);
  t.is(nodeSettings({ NODENAME: 'n1', NETPLUG_ROUTE_REFRESH_INTERVAL: '2.5' }).routeRefreshMs, 2_500);
  for (const bad of ['0', '-5', '90s', '86401', 'soon'])
    t.throws(() => nodeSettings({ NODENAME: 'n1', NETPLUG_ROUTE_REFRESH_INTERVAL: bad }), {
      message: `NETPLUG_ROUTE_REFRESH_INTERVAL "${bad}" must be a number of seconds from 1 to 86400`,
    });
});

test("IP autodetect: the Kubernetes Node's InternalIP on its interface, else the first non-virtual interface's global address", (t) => {
  const info = (address: string, cidr: string) => ({ address, cidr, family: 'IPv4' as const, internal: false, netmask: '', mac: '' });
  const interfaces = {
    lo: [{ ...info('127.0.0.1', '127.0.0.1/8'), internal: true }],
    docker0: [info('172.17.0.1', '172.17.0.1/16')],
    eth0: [info('169.254.3.3', '169.254.0.0/16'), info('192.168.5.5', '192.168.5.5/24')],
    eth1: [info('10.9.0.7', '10.9.0.7/20')],
  };
  t.deepEqual(nodeAddress({ autodetect: true }, ['10.9.0.7'], interfaces), {
    address: '10.9.0.7',
    prefixLength: 20,
    interface: 'eth1',
    source: "the Kubernetes Node's InternalIP",
  });
  t.deepEqual(nodeAddress({ autodetect: true }, [], interfaces), {
    address: '192.168.5.5',
    prefixLength: 24,
    interface: 'eth0',
    source: 'the first address found',
  });
  t.deepEqual(nodeAddress(parseAddressSetting('10.9.0.7/20'), [], interfaces), {
    address: '10.9.0.7',
    prefixLength: 20,
    interface: 'eth1',
    source: 'IP',
  });
  t.throws(() => nodeAddress(parseAddressSetting('10.9.9.9/20'), [], interfaces), {
    message: /IP 10\.9\.9\.9\/20: no interface of this node holds 10\.9\.9\.9/,
  });
  t.throws(() => nodeAddress({ autodetect: true }, [], { lo: interfaces.lo }), {
    message: /no up, non-virtual interface has a global IPv4 address; set IP/,
  });
});

test("a Node's spec fields are checked: a broken one is an error naming the field", (t) => {
  const entry = (spec: unknown) => ({ key: '/netplug/resources/v3/projectnet.org/nodes/n1', revision: '1', value: { spec } });
  t.deepEqual(checkedNodeSpec(entry({ bgp: { ipv4Address: '10.0.0.1/24' }, vxlanTunnelMACAddr: '66:AA:00:00:00:01' })), {
    bgp: { ipv4Address: '10.0.0.1/24' },
    vxlanTunnelMACAddr: '66:aa:00:00:00:01',
  });
  t.throws(() => checkedNodeSpec(entry({ bgp: { ipv4Address: '10.0.0.1' } })), {
    message: /Node "n1".*field "spec\.bgp\.ipv4Address" must be an IPv4 address with its prefix length, got "10\.0\.0\.1"/,
  });
  t.throws(() => checkedNodeSpec(entry({ ipv4VXLANTunnelAddr: 'x' })), {
    message: /field "spec\.ipv4VXLANTunnelAddr" must be an IPv4 address/,
  });
});
