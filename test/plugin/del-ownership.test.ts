// DEL removes only what belongs to its own attachment, validates the netconf before it touches
// the kernel, and succeeds when nothing is its own: a DEL with a live pod's namespace but another
// container's ID, a DEL after a refused ADD of `lo`, a DEL of a link netplug did not make.
import test, { type ExecutionContext } from 'ava';

import { hostLocalNetconf, hostVeth, invoke, reservations, tempDir } from '../helpers/cni.ts';
import { containerId, createNetns, ip, link, uniqueSubnet4 } from '../helpers/kernel.ts';

function pod(t: ExecutionContext) {
  const netns = createNetns(t, 'own');
  const dataDir = tempDir(t, 'hl');
  const netconf = hostLocalNetconf({ version: '1.0.0', dataDir, subnet: uniqueSubnet4() });
  const id = containerId();
  const add = invoke({ command: 'ADD', containerId: id, netns: netns.path, netconf });
  if (add.status !== 0) throw new Error(add.stdout);
  t.teardown(() => invoke({ command: 'DEL', containerId: id, netns: netns.path, netconf }));
  return { netns, dataDir, netconf, id };
}

test("a DEL for another container with a live pod's namespace leaves the pod's interface and address", (t) => {
  const { netns, dataDir, netconf, id } = pod(t);
  const stranger = invoke({ command: 'DEL', containerId: containerId(), netns: netns.path, netconf });
  t.is(stranger.status, 0, stranger.stdout);
  t.is(link('eth0', netns)?.linkinfo?.info_kind, 'veth', "the pod's eth0 is still there");
  t.truthy(link(hostVeth(id)), 'and its host end');
  t.is(reservations(dataDir).length, 1, "and its address (the stranger's DEL released nothing of it)");
  t.is(invoke({ command: 'DEL', containerId: id, netns: netns.path, netconf }).status, 0);
  t.is(link('eth0', netns), undefined, "the pod's own DEL removes it");
  t.deepEqual(reservations(dataDir), []);
});

test('after an ADD of "lo" is refused, DEL succeeds and leaves lo alone', (t) => {
  const netns = createNetns(t, 'own');
  const dataDir = tempDir(t, 'hl');
  const netconf = hostLocalNetconf({ version: '1.0.0', dataDir, subnet: uniqueSubnet4() });
  const call = { containerId: containerId(), netns: netns.path, ifname: 'lo', netconf };
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 1);
  const del = invoke({ ...call, command: 'DEL' });
  t.is(del.status, 0, del.stdout);
  t.truthy(link('lo', netns), 'lo is still there');
  t.deepEqual(reservations(dataDir), []);
  t.is(invoke({ ...call, command: 'DEL' }).status, 0, 'and again');
});

test('a link netplug did not make, at the interface name, is left alone by DEL', (t) => {
  const netns = createNetns(t, 'own');
  const dataDir = tempDir(t, 'hl');
  const netconf = hostLocalNetconf({ version: '1.0.0', dataDir, subnet: uniqueSubnet4() });
  ip(['link', 'add', 'eth0', 'type', 'bridge'], netns);
  ip(['link', 'add', 'vp0', 'type', 'veth', 'peer', 'name', 'vp1'], netns);
  for (const ifname of ['eth0', 'vp0']) {
    const del = invoke({ command: 'DEL', containerId: containerId(), netns: netns.path, ifname, netconf });
    t.is(del.status, 0, del.stdout);
    t.truthy(link(ifname, netns), `${ifname} is still there`);
  }
});

test('DEL with an invalid netconf fails with error 7 before touching the interface', (t) => {
  const { netns, netconf, id } = pod(t);
  for (const broken of [
    { ...netconf, num_queues: 'many' },
    { ...netconf, name: undefined },
  ]) {
    const del = invoke({ command: 'DEL', containerId: id, netns: netns.path, netconf: broken });
    t.is(del.status, 1);
    t.is(del.json?.code, 7, del.stdout);
    t.is(link('eth0', netns)?.linkinfo?.info_kind, 'veth', 'the interface is untouched');
  }
});
