// The MTU through the built executable: "mtu": 0 (auto) takes the node agent's file, else the host's
// default-route interface; an IPv4 pod with an MTU below IPv6's minimum of 1280 is networked.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { defaultRouteMtu } from '../../ts/config/mtu.ts';
import { hostLocalNetconf, invoke, tempDir } from '../helpers/cni.ts';
import { containerId, createNetns, link, ping, uniqueSubnet4 } from '../helpers/kernel.ts';

function addAndDel(t: ExecutionContext, extra: Record<string, unknown>) {
  const netns = createNetns(t, 'mtu');
  const netconf = hostLocalNetconf({ version: '1.1.0', dataDir: tempDir(t, 'hl'), subnet: uniqueSubnet4(), extra });
  const call = { containerId: containerId(), netns: netns.path, netconf };
  t.teardown(() => invoke({ ...call, command: 'DEL' }));
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 0, add.stdout + add.stderr);
  const pod = link('eth0', netns);
  const host = link(add.json.interfaces[0].name);
  const del = invoke({ ...call, command: 'DEL' });
  t.is(del.status, 0, del.stdout);
  t.is(link('eth0', netns), undefined);
  return { add, pod, host };
}

test('"mtu": 0 with the node agent\'s MTU file: that MTU on both ends and in the result', (t) => {
  const file = join(tempDir(t, 'mtu'), 'mtu');
  writeFileSync(file, '1420\n');
  const { add, pod, host } = addAndDel(t, { mtu: 0, mtu_file: file });
  t.is(pod?.mtu, 1420);
  t.is(host?.mtu, 1420);
  t.is(add.json.interfaces[1].mtu, 1420);
});

test('"mtu": 0 without the file: the MTU of the host\'s default-route interface', (t) => {
  const { pod, host } = addAndDel(t, { mtu: 0, mtu_file: join(tempDir(t, 'mtu'), 'absent') });
  const expected = defaultRouteMtu() ?? 1500;
  t.is(pod?.mtu, expected);
  t.is(host?.mtu, expected);
});

for (const mtu of [68, 576, 1279]) {
  test(`an IPv4 pod with mtu ${mtu} is networked`, (t) => {
    const netns = createNetns(t, 'mtu');
    const netconf = hostLocalNetconf({ version: '1.0.0', dataDir: tempDir(t, 'hl'), subnet: uniqueSubnet4(), extra: { mtu } });
    const call = { containerId: containerId(), netns: netns.path, netconf };
    t.teardown(() => invoke({ ...call, command: 'DEL' }));
    const add = invoke({ ...call, command: 'ADD' });
    t.is(add.status, 0, add.stdout);
    t.is(link('eth0', netns)?.mtu, mtu);
    if (mtu >= 576) t.true(ping(add.json.ips[0].address.split('/')[0]));
    t.is(invoke({ ...call, command: 'DEL' }).status, 0);
  });
}
