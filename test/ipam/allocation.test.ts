// netplug with netplug-ipam on a real etcd, through the built executables: pools by name and by
// CIDR, node selectors, dual stack, IP=, repeated ADD, DEL, workload endpoints, GC and STATUS.
import test, { type ExecutionContext } from 'ava';

import { invoke } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { added, addressesOf, ctl, ctlOk, etcdKeys, etcdValue, ipamNetconf, totalAllocated } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, link, ping } from '../helpers/kernel.ts';

const WEPS = '/netplug/resources/v3/projectnet.org/workloadendpoints/';

async function etcdWithPools(t: ExecutionContext, pools: Array<[string, string, ...string[]]>): Promise<EtcdServer> {
  const etcd = await startEtcd(t);
  for (const [name, cidr, ...flags] of pools) ctlOk(t, etcd, 'pool', 'create', name, '--cidr', cidr, ...flags);
  return etcd;
}

const within = (address: string, prefix: string) => address.startsWith(prefix);
/** The pod's addresses but its IPv6 link-local one. */
const globalAddresses = (netns: Parameters<typeof addresses>[1]) => addresses('eth0', netns).filter((a) => !a.startsWith('fe80:'));

test('a pod gets an address of a pool that selects its node; DEL gives it back', async (t) => {
  const etcd = await etcdWithPools(t, [['default', '10.61.0.0/16']]);
  const netns = createNetns(t, 'ip');
  const netconf = ipamNetconf(etcd);
  const call = { containerId: containerId(), netns: netns.path, netconf };
  const add = added(t, call);
  const [address] = addressesOf(add.json);
  t.true(within(address ?? '', '10.61.'), address);
  t.deepEqual(globalAddresses(netns), [`${address}/32`]);
  t.true(ping(address ?? ''), 'the host reaches the pod');
  t.is(totalAllocated(t, etcd), 1);
  t.is(invoke({ ...call, command: 'DEL' }).status, 0);
  t.is(totalAllocated(t, etcd), 0);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/handle/'), [], 'no handle left');
  t.deepEqual(await etcdKeys(t, etcd, WEPS), [], 'no workload endpoint left');
  t.is(invoke({ ...call, command: 'DEL' }).status, 0, 'DEL again succeeds');
});

test('pools named by name or by CIDR are used; a missing pool is named; a subset of a pool is refused', async (t) => {
  const etcd = await etcdWithPools(t, [
    ['blue', '10.62.0.0/16'],
    ['green', '10.63.0.0/16'],
    ['off', '10.64.0.0/16', '--disabled'],
  ]);
  const netns = createNetns(t, 'ip');
  const run = (pools: string[]) =>
    invoke({ command: 'ADD', containerId: containerId(), netns: netns.path, netconf: ipamNetconf(etcd, { ipam: { ipv4_pools: pools } }) });
  const byName = run(['green']);
  t.is(byName.status, 0, byName.stdout);
  t.true(within(addressesOf(byName.json)[0] ?? '', '10.63.'));

  const netns2 = createNetns(t, 'ip');
  const byCidr = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: netns2.path,
    netconf: ipamNetconf(etcd, { ipam: { ipv4_pools: ['10.62.0.0/16'] } }),
  });
  t.is(byCidr.status, 0, byCidr.stdout);
  t.true(within(addressesOf(byCidr.json)[0] ?? '', '10.62.'));

  const netns3 = createNetns(t, 'ip');
  const missing = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: netns3.path,
    netconf: ipamNetconf(etcd, { ipam: { ipv4_pools: ['purple'] } }),
  });
  t.is(missing.status, 1);
  t.is(missing.json.code, 7);
  t.is(missing.json.msg, 'netconf field "ipam.ipv4_pools": pool "purple" does not exist');
  const subset = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: netns3.path,
    netconf: ipamNetconf(etcd, { ipam: { ipv4_pools: ['10.62.7.0/24'] } }),
  });
  t.is(subset.json.code, 7);
  t.regex(subset.json.msg, /10\.62\.7\.0\/24 lies within pool "blue" \(10\.62\.0\.0\/16\); name a pool, or its exact CIDR/);
  const disabled = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: netns3.path,
    netconf: ipamNetconf(etcd, { ipam: { ipv4_pools: ['off'] } }),
  });
  t.regex(disabled.json.msg, /pool "off" \(10\.64\.0\.0\/16\) is disabled/);
  t.is(link('eth0', netns3), undefined, 'refused ADDs leave no interface');
  t.is(totalAllocated(t, etcd), 2, 'and take no address');
});

test('node selectors choose the pool by the node labels netplugctl gives', async (t) => {
  const etcd = await etcdWithPools(t, [
    ['east', '10.65.0.0/16', '--node-selector', 'zone == "east"'],
    ['west', '10.66.0.0/16', '--node-selector', 'zone in {"west", "north"} && !has(gpu)'],
  ]);
  ctlOk(t, etcd, 'node', 'create', 'node-e', '--label', 'zone=east');
  ctlOk(t, etcd, 'node', 'create', 'node-w', '--label', 'zone=west');
  ctlOk(t, etcd, 'node', 'create', 'node-g', '--label', 'zone=west', '--label', 'gpu=a100');
  const adds = ['node-e', 'node-w', 'node-g'].map((node) =>
    invoke({ command: 'ADD', containerId: containerId(), netns: createNetns(t, 'ns').path, netconf: ipamNetconf(etcd, { node }) }),
  );
  t.true(within(addressesOf(adds[0]?.json)[0] ?? '', '10.65.'), 'east');
  t.true(within(addressesOf(adds[1]?.json)[0] ?? '', '10.66.'), 'west');
  t.is(adds[2]?.json.code, 7);
  t.is(adds[2]?.json.msg, 'no enabled IPv4 pool selects node "node-g"');
});

test('dual stack: an IPv4 and an IPv6 address, both in one commit, both released by DEL', async (t) => {
  const etcd = await etcdWithPools(t, [
    ['v4', '10.67.0.0/16'],
    ['v6', 'fd67::/48'],
  ]);
  const netns = createNetns(t, 'ip');
  const call = { containerId: containerId(), netns: netns.path, netconf: ipamNetconf(etcd, { ipam: { assign_ipv6: 'true' } }) };
  const add = added(t, call);
  const [v4, v6] = addressesOf(add.json);
  t.true(within(v4 ?? '', '10.67.') && within(v6 ?? '', 'fd67:'), `${v4} ${v6}`);
  t.deepEqual(
    add.json.ips.map((ip: { address: string }) => ip.address.split('/')[1]),
    ['32', '128'],
  );
  t.deepEqual(
    add.json.routes.map((r: { dst: string }) => r.dst),
    ['0.0.0.0/0', '::/0'],
  );
  t.is(totalAllocated(t, etcd), 2);
  t.is(invoke({ ...call, command: 'DEL' }).status, 0);
  t.is(totalAllocated(t, etcd), 0);
});

test('IP= gets exactly that address; a second claim fails naming the holder; after DEL it can be had again', async (t) => {
  const etcd = await etcdWithPools(t, [['default', '10.68.0.0/16']]);
  const netconf = ipamNetconf(etcd);
  const first = { containerId: containerId(), netns: createNetns(t, 'ip').path, netconf, args: 'IgnoreUnknown=1;IP=10.68.200.7' };
  t.deepEqual(addressesOf(added(t, first).json), ['10.68.200.7']);
  const second = invoke({ command: 'ADD', containerId: containerId(), netns: createNetns(t, 'ip').path, netconf, args: 'IP=10.68.200.7' });
  t.is(second.json.code, 105);
  t.regex(
    second.json.msg,
    new RegExp(`the requested address 10\\.68\\.200\\.7 is in use \\(handle ${netconf.name}\\.${first.containerId} on node node-a\\)`),
  );
  const outside = invoke({ command: 'ADD', containerId: containerId(), netns: createNetns(t, 'ip').path, netconf, args: 'IP=192.0.2.1' });
  t.is(outside.json.code, 7);
  t.is(outside.json.msg, 'the requested address 192.0.2.1 is not in any enabled pool');
  t.is(invoke({ ...first, command: 'DEL' }).status, 0);
  const third = { containerId: containerId(), netns: createNetns(t, 'ip').path, netconf, args: 'IP=10.68.200.7' };
  t.deepEqual(addressesOf(added(t, third).json), ['10.68.200.7']);
  t.is(totalAllocated(t, etcd), 1);
});

test('a repeated ADD of the same attachment keeps its address and re-wires it', async (t) => {
  const etcd = await etcdWithPools(t, [['default', '10.69.0.0/16']]);
  const netns = createNetns(t, 'ip');
  const call = { containerId: containerId(), netns: netns.path, netconf: ipamNetconf(etcd) };
  const first = added(t, call);
  const again = added(t, call);
  t.deepEqual(addressesOf(again.json), addressesOf(first.json));
  t.is(again.json.interfaces[1].mac, first.json.interfaces[1].mac, 'the MAC follows the address');
  t.is(totalAllocated(t, etcd), 1, 'no second address');
  t.deepEqual(globalAddresses(netns), [`${addressesOf(first.json)[0]}/32`]);
  t.is(invoke({ ...call, command: 'DEL' }).status, 0);
  t.is(totalAllocated(t, etcd), 0);
});

test('the workload endpoint records the pod; a DEL for a stale container leaves the current one', async (t) => {
  const etcd = await etcdWithPools(t, [['default', '10.70.0.0/16']]);
  const netns = createNetns(t, 'ip');
  const netconf = ipamNetconf(etcd, { node: 'node-w' });
  const id = containerId();
  const add = added(t, { containerId: id, netns: netns.path, netconf });
  const [key] = await etcdKeys(t, etcd, WEPS);
  t.is(key, `${WEPS}default/node--w-cni-${id}-eth0`);
  const endpoint = await etcdValue(t, etcd, key ?? '');
  t.like(endpoint.spec, {
    orchestrator: 'cni',
    node: 'node-w',
    containerID: id,
    endpoint: 'eth0',
    interfaceName: add.json.interfaces[0].name,
    mac: add.json.interfaces[1].mac,
    ipNetworks: [add.json.ips[0].address],
    profiles: [netconf.name],
  });
  t.is(link('eth0', netns)?.address, endpoint.spec.mac, "the MAC recorded is the interface's");
  t.like(endpoint.metadata.labels, { 'projectnet.org/namespace': 'default', 'projectnet.org/orchestrator': 'cni' });
});

test('GC releases what attachments no longer listed hold, on this node and network only', async (t) => {
  const etcd = await etcdWithPools(t, [['default', '10.71.0.0/16']]);
  const netconf = ipamNetconf(etcd);
  const [kept, dropped] = [containerId(), containerId()];
  for (const id of [kept, dropped]) added(t, { containerId: id, netns: createNetns(t, 'gc').path, netconf });
  const otherNode = ipamNetconf(etcd, { node: 'node-b', name: netconf.name });
  added(t, { containerId: containerId(), netns: createNetns(t, 'gc').path, netconf: otherNode });
  t.is(totalAllocated(t, etcd), 3);
  const gc = invoke({ command: 'GC', netconf: { ...netconf, 'cni.dev/valid-attachments': [{ containerID: kept, ifname: 'eth0' }] } });
  t.is(gc.status, 0, gc.stdout);
  t.is(totalAllocated(t, etcd), 2, "the dropped attachment's address is released, node-b's is not");
  t.is((await etcdKeys(t, etcd, WEPS)).length, 2, 'and its workload endpoint removed');
  // libcni's misspelling is accepted too.
  const misspelt = invoke({ command: 'GC', netconf: { ...netconf, 'cni.dev/attachments': [] } });
  t.is(misspelt.status, 0);
  t.is(totalAllocated(t, etcd), 1);
});

test('STATUS: ready; 50 when etcd is unreachable; 50 when every usable pool is full', async (t) => {
  const etcd = await etcdWithPools(t, [['tiny', '10.72.0.0/30', '--block-size', '30']]);
  const netconf = ipamNetconf(etcd);
  t.is(invoke({ command: 'STATUS', netconf }).status, 0);
  for (let i = 0; i < 4; i++) added(t, { containerId: containerId(), netns: createNetns(t, 'st').path, netconf });
  const full = invoke({ command: 'STATUS', netconf });
  t.is(full.json.code, 50);
  t.is(full.json.msg, 'every usable IPv4 pool is exhausted: tiny (10.72.0.0/30)');
  const exhausted = invoke({ command: 'ADD', containerId: containerId(), netns: createNetns(t, 'st').path, netconf });
  t.is(exhausted.json.code, 104);
  t.regex(exhausted.json.msg, /no free IPv4 address in pool "tiny" \(10\.72\.0\.0\/30\)/);
  const unreachable = invoke({ command: 'STATUS', netconf: { ...netconf, etcd_endpoints: 'http://127.0.0.1:1' } });
  t.is(unreachable.json.code, 50);
  t.regex(unreachable.json.msg, /etcd/);
  const addUnreachable = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: createNetns(t, 'st').path,
    netconf: { ...netconf, etcd_endpoints: 'http://127.0.0.1:1' },
  });
  t.is(addUnreachable.json.code, 11, 'ADD: try again later');
  t.is(ctl(etcd, 'ipam', 'check', '--grace-period', '0').status, 0);
});
