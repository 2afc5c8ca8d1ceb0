// A failed ADD leaves nothing: the addresses IPAM handed out are released, the veth is gone, and
// one clear error names the cause. Failures are real ones, provoked in the kernel and in IPAM.
import test from 'ava';

import { hostLocalNetconf, hostVeth, invoke, reservations, tempDir } from '../helpers/cni.ts';
import { containerId, createNetns, deleteLinkAtTeardown, hostIfname, ip, link, uniqueSubnet4, uniqueSubnet6 } from '../helpers/kernel.ts';

/** A host-local range of exactly one address, so the test knows which one ADD will get. */
function singleAddress(subnet: string): { ranges: unknown; address: string } {
  const address = subnet.replace(/0\/24$/, '7');
  return { ranges: [[{ subnet, rangeStart: address, rangeEnd: address }]], address };
}

test('a host route held by another interface: ADD fails, the address is released, nothing is left', (t) => {
  const netns = createNetns(t, 'rb');
  const dataDir = tempDir(t, 'hl');
  const { ranges, address } = singleAddress(uniqueSubnet4());
  const other = hostIfname('npr');
  ip(['link', 'add', other, 'type', 'bridge']);
  deleteLinkAtTeardown(t, other);
  ip(['link', 'set', other, 'up']);
  ip(['route', 'add', `${address}/32`, 'dev', other]);

  const id = containerId();
  const add = invoke({
    command: 'ADD',
    containerId: id,
    netns: netns.path,
    netconf: hostLocalNetconf({ version: '1.0.0', dataDir, ranges }),
  });
  t.is(add.status, 1);
  t.is(add.json.code, 101);
  t.regex(add.json.msg, new RegExp(`a route to ${address.replaceAll('.', '\\.')}/32 already exists via interface "${other}"`));
  t.deepEqual(reservations(dataDir), [], `${address} was released`);
  t.is(link(hostVeth(id)), undefined);
  t.is(link('eth0', netns), undefined);
});

test('an MTU too small for IPv6 on a dual-stack pod: error 7 after IPAM, addresses released', (t) => {
  const netns = createNetns(t, 'rb');
  const dataDir = tempDir(t, 'hl');
  const netconf = hostLocalNetconf({
    version: '1.0.0',
    dataDir,
    ranges: [[{ subnet: uniqueSubnet4() }], [{ subnet: uniqueSubnet6() }]],
    extra: { mtu: 1000 },
  });
  const add = invoke({ command: 'ADD', containerId: containerId(), netns: netns.path, netconf });
  t.is(add.status, 1);
  t.is(add.json.code, 7);
  t.regex(add.json.msg, /MTU 1000 is outside 1280\.\.=65535/);
  t.deepEqual(reservations(dataDir), [], 'both addresses released');
  t.is(link('eth0', netns), undefined);
});

test('an interface name already taken in the namespace: refused before IPAM allocates anything', (t) => {
  const netns = createNetns(t, 'rb');
  const dataDir = tempDir(t, 'hl');
  ip(['link', 'add', 'eth0', 'type', 'bridge'], netns);
  const add = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: netns.path,
    netconf: hostLocalNetconf({ version: '1.0.0', dataDir, subnet: uniqueSubnet4() }),
  });
  t.is(add.status, 1);
  t.regex(add.json.msg, new RegExp(`interface "eth0" already exists in ${netns.path}; DEL the attachment before adding it again`));
  t.deepEqual(reservations(dataDir), []);
  t.is(link('eth0', netns)?.linkinfo?.info_kind, 'bridge', 'left alone');
});

test("IPAM's own failure passes through with its code, and nothing is made", (t) => {
  const [first, second] = [createNetns(t, 'rb1'), createNetns(t, 'rb2')];
  const dataDir = tempDir(t, 'hl');
  const { ranges } = singleAddress(uniqueSubnet4());
  const netconf = hostLocalNetconf({ version: '1.0.0', dataDir, ranges });
  const [a, b] = [containerId(), containerId()];
  t.is(invoke({ command: 'ADD', containerId: a, netns: first.path, netconf }).status, 0);
  const add = invoke({ command: 'ADD', containerId: b, netns: second.path, netconf });
  t.is(add.status, 1);
  t.regex(add.json.msg, /^host-local: .*no IP addresses available in range set/);
  t.is(link(hostVeth(b)), undefined);
  t.is(link('eth0', second), undefined);
  t.is(reservations(dataDir).length, 1, "the first pod's address is untouched");
  t.is(invoke({ command: 'DEL', containerId: a, netns: first.path, netconf }).status, 0);
});
