// What netplug-node's addresses subsystem has left to write, from the cluster alone
// (ts/node/addresses/plan-addresses.ts): a tunnel address to allocate, give back or keep; the
// spec to publish once the tunnel addresses are settled; nothing once what it wrote is heard back
// (so its own writes do not wake it again).
import test from 'ava';

import { planAddresses, publishWork, tunnelWork } from '../../ts/node/addresses/plan-addresses.ts';
import type { NodeAddress } from '../../ts/node/shared/node-address.ts';
import type { ClusterState } from '../../ts/node/shared/read-cluster.ts';
import { vxlanMacOf } from '../../ts/node/shared/tunnels.ts';
import { poolsOf } from '../../ts/ipam/pools.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import type { NodeSpec } from '../../ts/model/node.ts';

const address: NodeAddress = { address: '10.0.0.5', prefixLength: 24, interface: 'eth0', source: 'IP' };
const pool = (vxlanMode: 'Always' | 'Never') => {
  const resource = poolResource('p', { cidr: '10.244.0.0/16', 'vxlan-mode': vxlanMode }, new Date(0));
  return poolsOf([{ key: keys.pool('p'), value: resource, revision: '1' }]);
};
const cluster = (vxlanMode: 'Always' | 'Never', held: string[], spec: NodeSpec): ClusterState => ({
  nodes: [{ name: 'n1', labels: {}, spec, ...(spec.vxlanTunnelMACAddr ? { vxlanMac: spec.vxlanTunnelMACAddr } : {}) }],
  blocks: [],
  pools: pool(vxlanMode),
  workloads: [],
  tunnelAddresses: new Map(held.length > 0 ? [['vxlan-tunnel-addr-n1', held]] : []),
  broken: [],
});

test('a VXLAN pool: allocate first, then publish the address and MAC; nothing left once both are heard back', (t) => {
  const fresh = planAddresses(cluster('Always', [], {}), 'n1', address);
  t.truthy(tunnelWork(fresh, 'vxlan'), 'no address held: the allocator must take one');
  t.is(tunnelWork(fresh, 'ipip'), undefined, 'no pool asks for IP-in-IP and none is held');
  t.is(publishWork(fresh), undefined, 'nothing published before the tunnel address is settled');

  const allocated = planAddresses(cluster('Always', ['10.244.3.4'], {}), 'n1', address);
  t.is(tunnelWork(allocated, 'vxlan'), undefined);
  const spec = { bgp: { ipv4Address: '10.0.0.5/24' }, ipv4VXLANTunnelAddr: '10.244.3.4', vxlanTunnelMACAddr: vxlanMacOf('n1') };
  t.deepEqual(allocated.spec, spec);
  t.is(publishWork(allocated), JSON.stringify(spec));

  const published = planAddresses(cluster('Always', ['10.244.3.4'], spec), 'n1', address);
  t.is(publishWork(published), undefined, 'its own write heard back: nothing to do');
});

test('the MAC the node published stays; no pool asking any more: give the address back, then publish without it', (t) => {
  const spec = { bgp: { ipv4Address: '10.0.0.5/24' }, ipv4VXLANTunnelAddr: '10.244.3.4', vxlanTunnelMACAddr: '66:00:00:00:00:01' };
  t.is(publishWork(planAddresses(cluster('Always', ['10.244.3.4'], spec), 'n1', address)), undefined);
  const dropped = planAddresses(cluster('Never', ['10.244.3.4'], spec), 'n1', address);
  t.truthy(tunnelWork(dropped, 'vxlan'), 'held, but no pool asks: the allocator gives it back');
  t.is(publishWork(dropped), undefined);
  const released = planAddresses(cluster('Never', [], spec), 'n1', address);
  t.is(publishWork(released), JSON.stringify({ bgp: { ipv4Address: '10.0.0.5/24' } }));
  t.truthy(tunnelWork(planAddresses(cluster('Always', ['10.244.3.4', '10.244.3.5'], spec), 'n1', address), 'vxlan'), 'two held: one goes');
});

test('a new underlay address is published', (t) => {
  const spec = { bgp: { ipv4Address: '10.0.0.5/24' } };
  t.is(publishWork(planAddresses(cluster('Never', [], spec), 'n1', address)), undefined);
  t.is(
    publishWork(planAddresses(cluster('Never', [], spec), 'n1', { ...address, address: '10.0.0.6' })),
    JSON.stringify({ bgp: { ipv4Address: '10.0.0.6/24' } }),
  );
});

test('a node whose document is gone and back: the work to publish differs, so the feed wakes the publish again at once', (t) => {
  const spec = { bgp: { ipv4Address: '10.0.0.5/24' } };
  const gone: ClusterState = { ...cluster('Never', [], {}), nodes: [] };
  const whileGone = publishWork(planAddresses(gone, 'n1', address));
  t.truthy(whileGone, 'nothing published: there is work');
  const back = publishWork(planAddresses(cluster('Never', [], {}), 'n1', address));
  t.is(back, JSON.stringify(spec));
  t.not(back, whileGone, 'the Node re-created without its annotations: a change the feed trigger enqueues');
});
