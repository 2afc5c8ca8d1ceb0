// Teardown idempotence, CHECK catching changes, and 50 pods in parallel without any thread of
// this process (JS thread, libuv pool) ever leaving the host namespace.
import { readlinkSync, writeFileSync } from 'node:fs';

import test from 'ava';

import { checkWorkload, interfacePresence, setupWorkload, teardownWorkload, type WorkloadSpec } from '../../ts/dataplane/index.ts';
import {
  createNetns,
  hostIfname,
  ip,
  link,
  ping,
  routes,
  threadsOutsideHostNamespace,
  uniqueV4,
  uniqueV6,
  type TestNetns,
} from '../helpers/kernel.ts';

function podSpec(netns: TestNetns, addrs: string[]): WorkloadSpec {
  return { netns: netns.path, containerIfname: 'eth0', hostIfname: hostIfname(), addresses: addrs };
}

test('teardown removes both ends and host routes, and is idempotent', async (t) => {
  const netns = createNetns(t);
  const v4 = uniqueV4();
  const spec = podSpec(netns, [v4]);
  await setupWorkload(spec);
  t.is(await interfacePresence(netns.path, 'eth0', spec.hostIfname), 'attached');
  t.is(await interfacePresence(netns.path, 'eth0', 'cali00000000000'), 'foreign', 'the peer of another host link');
  t.is(await teardownWorkload(netns.path, 'eth0'), 'removed');
  t.is(await interfacePresence(netns.path, 'eth0', spec.hostIfname), 'absent');
  t.is(await interfacePresence('/run/netns/netplug-gone', 'eth0', spec.hostIfname), 'absent');
  t.is(link(spec.hostIfname), undefined);
  t.is(link('eth0', netns), undefined);
  t.false(routes(4).some((r) => r.startsWith(`${v4} `)));
  t.is(await teardownWorkload(netns.path, 'eth0'), 'link-gone');
  t.is(await teardownWorkload('', 'eth0'), 'namespace-gone');
  t.is(await teardownWorkload('/run/netns/netplug-gone', 'eth0'), 'namespace-gone');
});

test('check reports a removed route and a changed sysctl', async (t) => {
  const netns = createNetns(t);
  const spec = podSpec(netns, [uniqueV4()]);
  await setupWorkload(spec);
  t.deepEqual(await checkWorkload(spec), []);
  ip(['route', 'del', 'default'], netns);
  writeFileSync(`/proc/sys/net/ipv4/conf/${spec.hostIfname}/proxy_arp`, '0');
  t.deepEqual(await checkWorkload(spec), [
    { subject: `net.ipv4.conf.${spec.hostIfname}.proxy_arp`, expected: '1', actual: '0' },
    {
      subject: `route to 0.0.0.0/0 in ${netns.path}`,
      expected: '0.0.0.0/0 via 169.254.1.1 dev "eth0"',
      actual: 'missing',
    },
  ]);
});

test('50 pods set up in parallel, only on dedicated namespace threads', async (t) => {
  const jsThread = readlinkSync('/proc/thread-self/ns/net');
  const onlyDedicated = (when: string) =>
    t.true(
      threadsOutsideHostNamespace().every((name) => name === 'netplug-netns'),
      when,
    );
  const pods = Array.from({ length: 50 }, (_, i) => podSpec(createNetns(t, `p${i}`), [uniqueV4(), uniqueV6()]));

  const pending = pods.map((spec) => setupWorkload(spec));
  onlyDedicated('while 50 set-ups are in flight');
  const made = await Promise.all(pending);
  t.deepEqual(
    made.map((m) => m.host.name),
    pods.map((p) => p.hostIfname),
  );
  for (const pod of pods) t.true(ping(pod.addresses[0] ?? ''), `${pod.addresses[0]} answers`);

  const removing = pods.map((p) => teardownWorkload(p.netns, 'eth0'));
  onlyDedicated('while 50 teardowns are in flight');
  t.deepEqual(
    await Promise.all(removing),
    pods.map(() => 'removed'),
  );
  onlyDedicated('after all of them');
  t.is(readlinkSync('/proc/thread-self/ns/net'), jsThread, 'the JS thread never moved');
});
