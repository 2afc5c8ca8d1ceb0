// The node's IPv6 addresses (pure: no kernel, no datastore): the IP6 setting, its autodetection,
// its place in the Node's spec and on the Kubernetes Node, and its publishing; the IPv6 VXLAN
// tunnel address and MAC likewise.
import test from 'ava';

import { checkedNodeSpec } from '../../ts/model/checked-documents.ts';
import { poolsOf } from '../../ts/ipam/pools.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { planAddresses, publishWork, tunnelWork } from '../../ts/node/addresses/plan-addresses.ts';
import { sameSpec } from '../../ts/node/addresses/publish-addresses.ts';
import { type NodeAddress, nodeAddress6, parseAddress6Setting } from '../../ts/node/shared/node-address.ts';
import { clusterStateOf, type ClusterState } from '../../ts/node/shared/read-cluster.ts';
import { nodeSettings } from '../../ts/node/shared/settings.ts';
import { vxlanMacOf } from '../../ts/node/shared/tunnels.ts';
import { nodeEntry } from '../../ts/store/kubernetes/documents.ts';

test('IP6: none (the default), autodetect, or an IPv6 address with its prefix length; anything else is refused naming it', (t) => {
  t.deepEqual(nodeSettings({ NODENAME: 'n1' }).nodeAddress6, { none: true });
  t.deepEqual(nodeSettings({ NODENAME: 'n1', IP6: 'None' }).nodeAddress6, { none: true });
  t.deepEqual(nodeSettings({ NODENAME: 'n1', IP6: 'autodetect' }).nodeAddress6, { autodetect: true });
  t.deepEqual(nodeSettings({ NODENAME: 'n1', IP6: 'FD00:30:1::5/64' }).nodeAddress6, { address: 'fd00:30:1::5', prefixLength: 64 });
  for (const bad of ['fd00::5', '10.0.0.5/24', 'fd00::5/129', 'fd00::5/0', 'eth0'])
    t.throws(() => nodeSettings({ NODENAME: 'n1', IP6: bad }), {
      message: `IP6 "${bad}" must be none, autodetect or an IPv6 address with its prefix length, such as fd00:30::5/64`,
    });
  t.throws(() => parseAddress6Setting('fd00::5'), { message: /^IP6 "fd00::5" must be none, autodetect or an IPv6 address/ });
});

test("IP6 autodetect: the Kubernetes Node's IPv6 InternalIP on its interface, else the first non-virtual interface's global IPv6 address", (t) => {
  const info = (address: string, cidr: string, family: 'IPv4' | 'IPv6' = 'IPv6') => ({
    address,
    cidr,
    family,
    internal: false,
    netmask: '',
    mac: '',
    scopeid: 0,
  });
  const interfaces = {
    lo: [{ ...info('::1', '::1/128'), internal: true }],
    docker0: [info('fd17::1', 'fd17::1/64')],
    eth0: [info('10.0.0.5', '10.0.0.5/24', 'IPv4'), info('fe80::1', 'fe80::1/64'), info('fd00:30:1::5', 'fd00:30:1::5/64')],
    eth1: [info('2001:db8::7', '2001:db8::7/56')],
  };
  t.is(nodeAddress6({ none: true }, [], interfaces), undefined);
  t.deepEqual(nodeAddress6({ autodetect: true }, ['10.0.0.5', '2001:db8:0::7'], interfaces), {
    address: '2001:db8::7',
    prefixLength: 56,
    interface: 'eth1',
    source: "the Kubernetes Node's InternalIP",
  });
  t.deepEqual(nodeAddress6({ autodetect: true }, ['10.0.0.5'], interfaces), {
    address: 'fd00:30:1::5',
    prefixLength: 64,
    interface: 'eth0',
    source: 'the first address found',
  });
  t.deepEqual(nodeAddress6(parseAddress6Setting('2001:db8::7/56'), [], interfaces), {
    address: '2001:db8::7',
    prefixLength: 56,
    interface: 'eth1',
    source: 'IP6',
  });
  t.throws(() => nodeAddress6(parseAddress6Setting('fd00:30:1::9/64'), [], interfaces), {
    message: /^IP6 fd00:30:1::9\/64: no interface of this node holds fd00:30:1::9; set IP6/,
  });
  t.throws(() => nodeAddress6({ autodetect: true }, [], { lo: interfaces.lo, eth0: [info('fe80::1', 'fe80::1/64')] }), {
    message: /^IP6 is autodetect, but no up, non-virtual interface has a global IPv6 address; set IP6/,
  });
});

const NODE_KEY = '/netplug/resources/v3/projectnet.org/nodes/n1';

test("spec.bgp.ipv6Address: checked, read back as the node's IPv6 address, and the Kubernetes Node's projectnet.org/IPv6Address", (t) => {
  const entry = (spec: unknown) => ({ key: NODE_KEY, revision: '1', value: { metadata: { name: 'n1', labels: {} }, spec } });
  const spec = { bgp: { ipv4Address: '10.0.0.5/24', ipv6Address: 'fd00:30:1::5/64' } };
  t.deepEqual(checkedNodeSpec(entry(spec)), spec);
  t.throws(() => checkedNodeSpec(entry({ bgp: { ipv6Address: 'fd00:30:1::5' } })), {
    message: /field "spec\.bgp\.ipv6Address" must be an IPv6 address with its prefix length, got "fd00:30:1::5"/,
  });
  t.throws(() => checkedNodeSpec(entry({ bgp: { ipv6Address: '10.0.0.5/24' } })), { message: /spec\.bgp\.ipv6Address/ });
  const [node] = clusterStateOf([entry(spec)], [], []).nodes;
  t.deepEqual(node?.address6, { address: 'fd00:30:1::5', prefixLength: 64 });
  t.deepEqual(clusterStateOf([entry({ bgp: { ipv4Address: '10.0.0.5/24' } })], [], []).nodes[0]?.address6, undefined);

  const kube = nodeEntry({
    metadata: {
      name: 'n1',
      annotations: { 'projectnet.org/IPv4Address': '10.0.0.5/24', 'projectnet.org/IPv6Address': 'fd00:30:1::5/64' },
    },
  } as Parameters<typeof nodeEntry>[0]);
  t.deepEqual((kube.value as { spec: unknown }).spec, spec);
});

test('the IPv6 address is published beside the IPv4 one, and a change of it is work left to do', (t) => {
  const address: NodeAddress = { address: '10.0.0.5', prefixLength: 24, interface: 'eth0', source: 'IP' };
  const address6: NodeAddress = { address: 'fd00:30:1::5', prefixLength: 64, interface: 'eth0', source: 'IP6' };
  const cluster = (spec: object): ClusterState => ({
    nodes: [{ name: 'n1', labels: {}, spec }],
    blocks: [],
    pools: [],
    workloads: [],
    tunnelAddresses: new Map(),
    broken: [],
  });
  const spec = { bgp: { ipv4Address: '10.0.0.5/24', ipv6Address: 'fd00:30:1::5/64' } };
  const fresh = planAddresses(cluster({ bgp: { ipv4Address: '10.0.0.5/24' } }), 'n1', address, address6);
  t.deepEqual(fresh.spec, spec);
  t.is(publishWork(fresh), JSON.stringify(spec));
  t.is(publishWork(planAddresses(cluster(spec), 'n1', address, address6)), undefined);
  t.is(
    publishWork(planAddresses(cluster(spec), 'n1', address)),
    JSON.stringify({ bgp: { ipv4Address: '10.0.0.5/24' } }),
    'IP6 back to none',
  );
  t.false(sameSpec(spec, { bgp: { ipv4Address: '10.0.0.5/24' } }));
});

test('an IPv6 pool with VXLAN: the node takes an IPv6 tunnel address (with IP6 only) and publishes it with its IPv6 VXLAN MAC', (t) => {
  const address: NodeAddress = { address: '10.0.0.5', prefixLength: 24, interface: 'eth0', source: 'IP' };
  const address6: NodeAddress = { address: 'fd00:30:1::5', prefixLength: 64, interface: 'eth0', source: 'IP6' };
  const pool = poolResource('v6', { cidr: 'fd00:245::/48', 'vxlan-mode': 'Always' }, new Date(0));
  const cluster = (held: string[]): ClusterState => ({
    nodes: [{ name: 'n1', labels: {}, spec: {} }],
    blocks: [],
    pools: poolsOf([{ key: keys.pool('v6'), value: pool, revision: '1' }]),
    workloads: [],
    tunnelAddresses: new Map(held.length > 0 ? [['vxlan-v6-tunnel-addr-n1', held]] : []),
    broken: [],
  });
  const fresh = planAddresses(cluster([]), 'n1', address, address6);
  t.truthy(tunnelWork(fresh, 'vxlan-v6'), 'the allocator must take an IPv6 address');
  t.is(tunnelWork(fresh, 'vxlan'), undefined, 'the pool is IPv6: no IPv4 VXLAN address');
  t.is(publishWork(fresh), undefined);
  const held = planAddresses(cluster(['fd00:245::7']), 'n1', address, address6);
  t.deepEqual(held.spec, {
    bgp: { ipv4Address: '10.0.0.5/24', ipv6Address: 'fd00:30:1::5/64' },
    ipv6VXLANTunnelAddr: 'fd00:245::7',
    vxlanTunnelMACAddrV6: vxlanMacOf('n1', 6),
  });
  t.not(vxlanMacOf('n1', 6), vxlanMacOf('n1'));
  const withoutIp6 = planAddresses(cluster(['fd00:245::7']), 'n1', address);
  t.truthy(tunnelWork(withoutIp6, 'vxlan-v6'), 'IP6 none: the address held is given back');
  t.is(tunnelWork(planAddresses(cluster([]), 'n1', address), 'vxlan-v6'), undefined);

  const entry = {
    key: NODE_KEY,
    revision: '1',
    value: { spec: { ipv6VXLANTunnelAddr: 'fd00:245::7', vxlanTunnelMACAddrV6: '66:AA:00:00:00:06' } },
  };
  t.deepEqual(checkedNodeSpec(entry), { ipv6VXLANTunnelAddr: 'fd00:245::7', vxlanTunnelMACAddrV6: '66:aa:00:00:00:06' });
  t.throws(() => checkedNodeSpec({ ...entry, value: { spec: { ipv6VXLANTunnelAddr: '10.0.0.1' } } }), {
    message: /field "spec\.ipv6VXLANTunnelAddr" must be an IPv6 address/,
  });
  const kube = nodeEntry({
    metadata: {
      name: 'n1',
      annotations: { 'projectnet.org/IPv6VXLANTunnelAddr': 'fd00:245::7', 'projectnet.org/VXLANTunnelMACAddrV6': '66:aa:00:00:00:06' },
    },
  } as Parameters<typeof nodeEntry>[0]);
  t.deepEqual((kube.value as { spec: unknown }).spec, { ipv6VXLANTunnelAddr: 'fd00:245::7', vxlanTunnelMACAddrV6: '66:aa:00:00:00:06' });
  const read = clusterStateOf([{ ...entry, value: { metadata: { name: 'n1', labels: {} }, ...entry.value } }], [], []).nodes[0];
  t.like(read, { vxlanTunnelAddr6: 'fd00:245::7', vxlanMac6: '66:aa:00:00:00:06' });
});
