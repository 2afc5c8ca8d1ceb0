// DEL succeeds whatever is already gone; CHECK really checks.
import { rmSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { hostLocalNetconf, hostVeth, invoke, reservations, tempDir } from '../helpers/cni.ts';
import { containerId, createNetns, ip, uniqueSubnet4 } from '../helpers/kernel.ts';

function added(t: ExecutionContext) {
  const netns = createNetns(t, 'dc');
  const dataDir = tempDir(t, 'hl');
  const netconf = hostLocalNetconf({ version: '1.0.0', dataDir, subnet: uniqueSubnet4() });
  const id = containerId();
  const add = invoke({ command: 'ADD', containerId: id, netns: netns.path, netconf });
  if (add.status !== 0) throw new Error(add.stdout);
  return { netns, dataDir, netconf, id, result: add.json, call: { containerId: id, netns: netns.path } };
}

test('DEL after the runtime deleted the namespace releases the address', (t) => {
  const { netns, dataDir, netconf, call } = added(t);
  ip(['netns', 'del', netns.name]);
  const del = invoke({ ...call, command: 'DEL', netconf });
  t.is(del.status, 0, del.stdout);
  t.deepEqual(reservations(dataDir), []);
  t.is(invoke({ ...call, command: 'DEL', netconf, netns: '' }).status, 0);
});

test('DEL of a container never added succeeds', (t) => {
  const netns = createNetns(t, 'dc');
  const dataDir = tempDir(t, 'hl');
  const netconf = hostLocalNetconf({ version: '1.0.0', dataDir, subnet: uniqueSubnet4() });
  t.is(invoke({ command: 'DEL', containerId: containerId(), netns: netns.path, netconf }).status, 0);
  t.is(invoke({ command: 'DEL', containerId: containerId(), netns: '/run/netns/netplug-never', netconf }).status, 0);
});

test('CHECK fails once a route is removed, naming it', (t) => {
  const { netns, netconf, call, result } = added(t);
  const check = () => invoke({ ...call, command: 'CHECK', netconf: { ...netconf, prevResult: result } });
  t.is(check().status, 0);
  ip(['route', 'del', 'default'], netns);
  const failed = check();
  t.is(failed.status, 1);
  t.is(failed.json.code, 102);
  t.is(
    failed.json.msg,
    `"eth0" in ${netns.path} is not as ADD left it: route to 0.0.0.0/0 in ${netns.path}: expected 0.0.0.0/0 via 169.254.1.1 dev "eth0", found missing`,
  );
  ip(['route', 'add', 'default', 'via', '169.254.1.1', 'dev', 'eth0'], netns);
  t.is(check().status, 0, 'and passes once it is back');
});

test('CHECK fails when IPAM lost the allocation, or the veth is gone', (t) => {
  const { netconf, call, result, dataDir } = added(t);
  const check = () => invoke({ ...call, command: 'CHECK', netconf: { ...netconf, prevResult: result } });
  const address = result.ips[0].address.split('/')[0];
  rmSync(join(dataDir, 'netplug-test', address));
  const lost = check();
  t.is(lost.status, 1);
  t.regex(lost.json.msg, /^host-local: /, "IPAM's CHECK reports the missing reservation");

  const second = added(t);
  ip(['link', 'del', hostVeth(second.id)]);
  const gone = invoke({ ...second.call, command: 'CHECK', netconf: { ...second.netconf, prevResult: second.result } });
  t.is(gone.json?.code, 102);
  t.regex(gone.json.msg, new RegExp(`host interface "${hostVeth(second.id)}": expected a veth, found missing`));
});

test('GC and STATUS on a 1.1.0 network', (t) => {
  const dataDir = tempDir(t, 'hl');
  const netconf = hostLocalNetconf({ version: '1.1.0', dataDir, subnet: uniqueSubnet4() });
  const gc = invoke({ command: 'GC', netconf: { ...netconf, 'cni.dev/valid-attachments': [{ containerID: 'abc', ifname: 'eth0' }] } });
  t.is(gc.status, 0, gc.stdout);
  t.is(invoke({ command: 'STATUS', netconf }).status, 0, 'host-local is installed');
  const missing = invoke({ command: 'STATUS', netconf: { ...netconf, ipam: { type: 'host-locale' } } });
  t.is(missing.status, 1);
  t.is(missing.json.code, 50);
  t.regex(missing.json.msg, /IPAM plugin host-locale is not in CNI_PATH/);
});

test('Kubernetes-style CNI_ARGS are accepted', (t) => {
  const netns = createNetns(t, 'dc');
  const dataDir = tempDir(t, 'hl');
  const netconf = hostLocalNetconf({ version: '1.0.0', dataDir, subnet: uniqueSubnet4() });
  const call = {
    containerId: containerId(),
    netns: netns.path,
    args: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=x;K8S_POD_UID=u',
  };
  t.is(invoke({ ...call, command: 'ADD', netconf }).status, 0);
  t.is(invoke({ ...call, command: 'DEL', netconf }).status, 0);
});
