// netplug-ipam as an IPAM plugin of its own: another plugin (Debian's ptp) delegates to it, and
// the executable answers ADD, CHECK, DEL, GC and STATUS as the CNI specification has IPAM plugins do.
import { readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { CNI_PATH, invoke, NETPLUG, tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { addressesOf, ctlOk, ipamNetconf, NETPLUG_IPAM, totalAllocated } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, deleteLinkAtTeardown, hostIfname, ip, link } from '../helpers/kernel.ts';

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

test('an IPAM type that is netplug under another name: the chain stops at 4 delegations, error 7', (t) => {
  // "loopy" is the netplug executable (it runs as netplug under any name but netplug-ipam).
  const dir = tempDir(t, 'loop');
  symlinkSync(NETPLUG, join(dir, 'loopy'));
  const netns = createNetns(t, 'loop');
  const netconf = { cniVersion: '1.0.0', name: 'loop-net', type: 'netplug', ipam: { type: 'loopy' } };
  const add = invoke({ command: 'ADD', containerId: containerId(), netns: netns.path, netconf, path: `${dir}:${CNI_PATH}` });
  t.is(add.json?.code, 7, add.stdout);
  t.regex(
    add.json.msg,
    /^(loopy: )+netconf field "ipam\.type" names plugin "loopy", which would run 5 delegated plugins deep \(NETPLUG_DELEGATION_DEPTH=4\); netplug allows 4/,
  );
  t.is(add.json.msg.match(/loopy: /g)?.length, 4, 'four levels ran, the fifth was refused');
  t.is(link('eth0', netns), undefined);
  t.deepEqual(processesRunning(join(dir, 'loopy')), [], 'no process of the chain is left');
});

/** Processes whose executable path is `path`. */
function processesRunning(path: string): string[] {
  return readdirSync('/proc').filter((pid) => {
    try {
      return /^\d+$/.test(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === path;
    } catch {
      return false;
    }
  });
}
