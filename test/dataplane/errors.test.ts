// Kernel and input failures arrive as DataplaneError with the errno name and the operation.
import test from 'ava';

import { DataplaneError, setupWorkload, type WorkloadSpec } from '../../ts/dataplane/index.ts';
import { createNetns, deleteLinkAtTeardown, hostIfname, ip, link, uniqueV4, type TestNetns } from '../helpers/kernel.ts';

function podSpec(netns: TestNetns, extra: Partial<WorkloadSpec> = {}): WorkloadSpec {
  return { netns: netns.path, containerIfname: 'eth0', hostIfname: hostIfname(), addresses: [uniqueV4()], ...extra };
}

test('a missing namespace', async (t) => {
  const spec = podSpec(createNetns(t), { netns: '/run/netns/netplug-missing' });
  const err = await t.throwsAsync(setupWorkload(spec), { instanceOf: DataplaneError });
  t.is(err?.code, 'ENOENT');
  t.is(err?.op, 'open network namespace /run/netns/netplug-missing');
  t.regex(err?.message ?? '', /network namespace \/run\/netns\/netplug-missing does not exist/);
});

test('a name longer than 15 bytes', async (t) => {
  const spec = podSpec(createNetns(t), { hostIfname: 'netplug-far-too-long' });
  const err = await t.throwsAsync(setupWorkload(spec), { instanceOf: DataplaneError });
  t.is(err?.code, 'ENAMETOOLONG');
  t.regex(err?.message ?? '', /host interface name "netplug-far-too-long" is 20 bytes long; at most 15/);
});

test('a host name held by a link that is not a veth', async (t) => {
  const netns = createNetns(t);
  const spec = podSpec(netns);
  ip(['link', 'add', spec.hostIfname, 'type', 'bridge']);
  deleteLinkAtTeardown(t, spec.hostIfname);
  const err = await t.throwsAsync(setupWorkload(spec), { instanceOf: DataplaneError });
  t.is(err?.code, 'EEXIST');
  t.regex(err?.message ?? '', /is held by a bridge link, not a veth; refusing to replace it/);
  t.is(link(spec.hostIfname)?.linkinfo?.info_kind, 'bridge', 'left alone');
  t.is(link('eth0', netns), undefined, 'nothing made in the namespace');
});

test('an address that is not an IP', async (t) => {
  const spec = podSpec(createNetns(t), { addresses: ['10.0.0.300'] });
  const err = await t.throwsAsync(setupWorkload(spec), { instanceOf: DataplaneError });
  t.is(err?.code, 'EINVAL');
  t.regex(err?.message ?? '', /"10\.0\.0\.300" is not an IP address/);
  t.is(link(spec.hostIfname), undefined);
});
