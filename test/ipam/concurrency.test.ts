// netplug-ipam under concurrency and crashes, through the built executables on a real etcd:
// many ADDs at once get distinct addresses, plugin processes killed mid-ADD leave nothing DEL
// cannot clean, and an etcd that goes away mid-burst costs retries, never an address.
import test from 'ava';

import { invoke } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import {
  addressesOf,
  ctl,
  ctlOk,
  etcdKeys,
  etcdPut,
  invokeAsync,
  ipamNetconf,
  NETPLUG_IPAM,
  startInvocation,
  totalAllocated,
  allocatedByPool,
} from '../helpers/ipam.ts';
import { containerId, createNetns, link } from '../helpers/kernel.ts';
import { hostVeth } from '../helpers/cni.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('30 concurrent ADDs on two nodes: distinct addresses from the pools their selectors choose', async (t) => {
  t.timeout(5 * 60_000);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'rack-a', '--cidr', '10.81.0.0/16', '--node-selector', 'rack == "a"');
  ctlOk(t, etcd, 'pool', 'create', 'rack-b', '--cidr', '10.82.0.0/16', '--node-selector', 'rack == "b"');
  ctlOk(t, etcd, 'node', 'create', 'node-a', '--label', 'rack=a');
  ctlOk(t, etcd, 'node', 'create', 'node-b', '--label', 'rack=b');
  const name = 'burst30';
  const pods = Array.from({ length: 30 }, (_, i) => ({
    node: i % 2 === 0 ? 'node-a' : 'node-b',
    call: {
      containerId: containerId(),
      netns: createNetns(t, 'b30').path,
      netconf: ipamNetconf(etcd, { name, node: i % 2 === 0 ? 'node-a' : 'node-b' }),
    },
  }));
  const adds = await Promise.all(pods.map((p) => invokeAsync({ ...p.call, command: 'ADD' })));
  t.deepEqual(
    adds.map((a) => a.status),
    pods.map(() => 0),
    adds.find((a) => a.status !== 0)?.stdout,
  );
  const addresses = adds.map((a) => addressesOf(a.json)[0] ?? '');
  t.is(new Set(addresses).size, 30, 'distinct');
  for (const [i, p] of pods.entries())
    t.true(addresses[i]?.startsWith(p.node === 'node-a' ? '10.81.' : '10.82.'), `${p.node}: ${addresses[i]}`);
  t.deepEqual(allocatedByPool(t, etcd), { 'rack-a': 15, 'rack-b': 15 }, 'netplugctl counts 30');
  t.is(ctl(etcd, 'ipam', 'check', '--grace-period', '0').status, 0);

  const dels = await Promise.all(pods.map((p) => invokeAsync({ ...p.call, command: 'DEL' })));
  t.deepEqual(
    dels.map((d) => d.status),
    pods.map(() => 0),
  );
  t.is(totalAllocated(t, etcd), 0);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/handle/'), []);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/pending/'), [], 'no pending request left behind');
});

test('100 concurrent ADDs across 10 nodes through netplug-ipam: no duplicate, nothing left after DEL', async (t) => {
  t.timeout(5 * 60_000);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.83.0.0/16');
  const calls = Array.from({ length: 100 }, (_, i) => ({
    executable: NETPLUG_IPAM,
    containerId: containerId(),
    // IPAM plugins get the runtime's CNI_NETNS too, and do not touch it.
    netns: '/run/netns/netplug-ipam-test',
    netconf: ipamNetconf(etcd, { name: 'burst100', node: `node-${i % 10}` }),
  }));
  const adds = await Promise.all(calls.map((c) => invokeAsync({ ...c, command: 'ADD' })));
  t.deepEqual(
    adds.filter((a) => a.status !== 0).map((a) => a.stdout),
    [],
  );
  const addresses = adds.map((a) => addressesOf(a.json)[0]);
  t.is(new Set(addresses).size, 100, 'no address handed out twice');
  t.is(totalAllocated(t, etcd), 100);
  t.is(ctl(etcd, 'ipam', 'check', '--grace-period', '0').status, 0);
  const blocks = await etcdKeys(t, etcd, '/netplug/ipam/v2/assignment/ipv4/block/');
  t.true(blocks.length >= 10, `each node claimed its own block (${blocks.length} blocks)`);
  const dels = await Promise.all(calls.map((c) => invokeAsync({ ...c, command: 'DEL' })));
  t.deepEqual(
    dels.map((d) => d.status),
    calls.map(() => 0),
  );
  t.is(totalAllocated(t, etcd), 0);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/handle/'), []);
});

test('an ADD killed while its request waited on the node: DEL withdraws the request; the next ADD there allocates only its own address', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.85.0.0/16');
  const call = (id: string) => ({
    executable: NETPLUG_IPAM,
    containerId: id,
    netns: '/run/netns/netplug-ipam-test',
    netconf: ipamNetconf(etcd, { name: 'waited', node: 'node-a' }),
  });
  const other = call(containerId());
  t.is((await invokeAsync({ ...other, command: 'ADD' })).status, 0, 'node-a has a block');
  // What an ADD leaves when it is killed after its commit lost a race and before it was served.
  const killed = call(containerId());
  const handle = `waited.${killed.containerId}`;
  const pendingKey = `/netplug/ipam/v2/pending/node-a/${handle}`;
  await etcdPut(t, etcd, pendingKey, {
    handle,
    attributes: { node: 'node-a', ifname: 'eth0' },
    requests: [{ family: 4, pools: ['default'] }],
    created: new Date().toISOString(),
  });
  const del = await invokeAsync({ ...killed, command: 'DEL' });
  t.is(del.status, 0, del.stdout);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/pending/'), [], 'the request is withdrawn');
  t.is((await invokeAsync({ ...call(containerId()), command: 'ADD' })).status, 0);
  t.is(totalAllocated(t, etcd), 2, 'the two live containers, none for the killed one');
  t.false((await etcdKeys(t, etcd, '/netplug/ipam/v2/handle/')).includes(`/netplug/ipam/v2/handle/${handle}`));
});

test('plugin processes SIGKILLed at random points mid-ADD leave nothing DEL cannot clean', async (t) => {
  t.timeout(5 * 60_000);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.84.0.0/16');
  const pods = Array.from({ length: 24 }, () => ({
    containerId: containerId(),
    netns: createNetns(t, 'kill').path,
    netconf: ipamNetconf(etcd, { name: 'killed' }),
  }));
  const outcomes = await Promise.all(
    pods.map(async (pod, i) => {
      const { child, outcome } = startInvocation({ ...pod, command: 'ADD' });
      // Spread from before Node is up to after the commit (24 processes at once take a while):
      // every stage gets hit somewhere, and a few ADDs finish.
      await sleep(i * 30);
      child.kill('SIGKILL');
      return outcome;
    }),
  );
  t.log(`${outcomes.filter((o) => o.status === 0).length} of ${pods.length} finished before the kill`);
  // What a runtime does after a failed ADD: DEL the attachment.
  const dels = await Promise.all(pods.map((pod) => invokeAsync({ ...pod, command: 'DEL' })));
  t.deepEqual(
    dels.map((d) => d.status),
    pods.map(() => 0),
    dels.find((d) => d.status !== 0)?.stdout,
  );
  t.is(totalAllocated(t, etcd), 0);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/handle/'), []);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/resources/v3/projectnet.org/workloadendpoints/'), []);
  for (const pod of pods) t.is(link(hostVeth(pod.containerId)), undefined, 'no host veth left');
  const check = ctl(etcd, 'ipam', 'check', '--grace-period', '0');
  t.is(check.status, 0, check.stdout);
  t.regex(check.stdout, /no problems found/);
});

test('ADDs killed mid-way that no runtime DELs are released by GC', async (t) => {
  t.timeout(5 * 60_000);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.85.0.0/16');
  const netconf = ipamNetconf(etcd, { name: 'orphans' });
  const survivor = { containerId: containerId(), netns: createNetns(t, 'orph').path, netconf };
  t.is(invoke({ ...survivor, command: 'ADD' }).status, 0);
  const pods = Array.from({ length: 12 }, () => ({ containerId: containerId(), netns: createNetns(t, 'orph').path, netconf }));
  await Promise.all(
    pods.map(async (pod, i) => {
      const { child, outcome } = startInvocation({ ...pod, command: 'ADD' });
      await sleep(20 + i * 5);
      child.kill('SIGKILL');
      return outcome;
    }),
  );
  const gc = invoke({
    command: 'GC',
    netconf: { ...netconf, 'cni.dev/valid-attachments': [{ containerID: survivor.containerId, ifname: 'eth0' }] },
  });
  t.is(gc.status, 0, gc.stdout);
  t.is(totalAllocated(t, etcd), 1, 'only the valid attachment keeps its address');
  t.is((await etcdKeys(t, etcd, '/netplug/resources/v3/projectnet.org/workloadendpoints/')).length, 1, 'and its workload endpoint');
  t.is(ctl(etcd, 'ipam', 'check', '--grace-period', '0').status, 0);
});

test('etcd stopped and restarted mid-burst: every ADD succeeds or fails with 11; retries succeed; nothing lost or doubled', async (t) => {
  t.timeout(5 * 60_000);
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.86.0.0/16');
  const pods = Array.from({ length: 24 }, () => ({
    containerId: containerId(),
    netns: createNetns(t, 'down').path,
    netconf: ipamNetconf(etcd, { name: 'outage' }),
  }));
  // Three waves: the first done before the outage, the second caught in it, the third started
  // during it.
  const waves = [pods.slice(0, 8), pods.slice(8, 16), pods.slice(16)];
  const before = await Promise.all(waves[0]!.map((pod) => invokeAsync({ ...pod, command: 'ADD' })));
  const during = waves[1]!.map((pod) => invokeAsync({ ...pod, command: 'ADD' }));
  await sleep(40);
  await etcd.stop();
  const after = waves[2]!.map((pod) => invokeAsync({ ...pod, command: 'ADD' }));
  const first = [...before, ...(await Promise.all(during)), ...(await Promise.all(after))];
  const codes = first.map((o) => (o.status === 0 ? 0 : o.json?.code));
  t.log(
    `during the outage: ${codes.filter((c) => c === 0).length} succeeded, ${codes.filter((c) => c === 11).length} were told to try again`,
  );
  t.deepEqual(
    [...new Set(codes)].filter((c) => c !== 0 && c !== 11),
    [],
    `only success or 11: ${first.find((o) => o.status !== 0 && o.json?.code !== 11)?.stdout}`,
  );
  t.true(codes.includes(11), 'the outage was hit');
  for (const o of first.filter((o) => o.status !== 0)) t.false(/\n\s+at /.test(o.stdout + o.stderr), 'no stack trace');

  await etcd.start();
  const retried = await Promise.all(pods.map((pod, i) => (codes[i] === 0 ? first[i] : invokeAsync({ ...pod, command: 'ADD' }))));
  t.deepEqual(
    retried.map((o) => o?.status),
    pods.map(() => 0),
    retried.find((o) => o?.status !== 0)?.stdout,
  );
  const addresses = retried.map((o) => addressesOf(o?.json)[0]);
  t.is(new Set(addresses).size, pods.length, 'distinct');
  t.is(totalAllocated(t, etcd), pods.length, 'exactly one address per pod: none lost, none doubled');
  const dels = await Promise.all(pods.map((pod) => invokeAsync({ ...pod, command: 'DEL' })));
  t.deepEqual(
    dels.map((d) => d.status),
    pods.map(() => 0),
  );
  t.is(totalAllocated(t, etcd), 0);
  t.is(ctl(etcd, 'ipam', 'check', '--grace-period', '0').status, 0);
});
