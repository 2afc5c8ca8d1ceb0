// netplug-ipam as an IPAM plugin of its own: another plugin (Debian's ptp) delegates to it, and
// the executable answers ADD, CHECK, DEL, GC and STATUS as the CNI specification has IPAM plugins do.
import test from 'ava';

import { invoke } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { addressesOf, ctlOk, ipamNetconf, NETPLUG_IPAM, totalAllocated } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, deleteLinkAtTeardown, hostIfname, ip } from '../helpers/kernel.ts';

// Like the reference's IPAM, netplug-ipam returns no gateway (its own plugin routes via a
// link-local next hop), so the delegating plugin here is one that needs none: macvlan.
test("Debian's macvlan delegates its IPAM to netplug-ipam", async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'macvlan-pool', '--cidr', '10.105.0.0/16');
  const master = hostIfname('npm');
  ip(['link', 'add', master, 'type', 'bridge']);
  deleteLinkAtTeardown(t, master);
  ip(['link', 'set', master, 'up']);
  const netns = createNetns(t, 'mv');
  const netconf = { ...ipamNetconf(etcd, { name: 'macvlan-net', version: '1.0.0' }), type: 'macvlan', master, mode: 'bridge' };
  const call = { executable: '/usr/lib/cni/macvlan', containerId: containerId(), netns: netns.path, netconf };
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 0, add.stdout);
  const [address] = addressesOf(add.json);
  t.true(address?.startsWith('10.105.'), address);
  t.true(addresses('eth0', netns).includes(`${address}/26`), 'macvlan places the block prefix netplug-ipam returned');
  t.is(totalAllocated(t, etcd), 1);
  t.is(invoke({ ...call, command: 'DEL' }).status, 0);
  t.is(totalAllocated(t, etcd), 0);
});

test('the netplug-ipam executable: ADD, CHECK, GC, STATUS, DEL, and a netconf that is not its own', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.106.0.0/16');
  const netconf = ipamNetconf(etcd);
  const call = { executable: NETPLUG_IPAM, containerId: containerId(), netns: '/run/netns/netplug-ipam-only', netconf };
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 0, add.stdout);
  t.deepEqual(Object.keys(add.json).sort(), ['cniVersion', 'dns', 'ips'], 'an IPAM result: addresses, no interfaces');
  t.regex(add.json.ips[0].address, /^10\.106\.\d+\.\d+\/26$/);
  t.deepEqual(invoke({ ...call, command: 'ADD' }).json.ips, add.json.ips, 'idempotent');
  t.is(invoke({ ...call, command: 'CHECK', netconf: { ...netconf, prevResult: add.json } }).status, 0);
  t.is(invoke({ ...call, command: 'STATUS' }).status, 0);
  t.is(
    invoke({
      ...call,
      command: 'GC',
      netconf: { ...netconf, 'cni.dev/valid-attachments': [{ containerID: call.containerId, ifname: 'eth0' }] },
    }).status,
    0,
  );
  t.is(totalAllocated(t, etcd), 1, 'GC keeps a valid attachment');
  t.is(invoke({ ...call, command: 'DEL' }).status, 0);
  t.is(totalAllocated(t, etcd), 0);
  const check = invoke({ ...call, command: 'CHECK', netconf: { ...netconf, prevResult: add.json } });
  t.is(check.json.code, 102);
  t.regex(check.json.msg, /netplug-ipam holds no address for .* interface "eth0"/);
  const foreign = invoke({ ...call, command: 'ADD', netconf: { ...netconf, ipam: { type: 'host-local', subnet: '10.9.0.0/24' } } });
  t.is(foreign.json.code, 7);
  t.is(foreign.json.msg, 'netconf field "ipam.type" is "host-local"; netplug-ipam serves "netplug-ipam"');
});
