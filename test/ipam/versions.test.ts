// netplug with netplug-ipam for every CNI version a runtime may speak: ADD, CHECK and DEL of a
// dual-stack pod, the result in that version's shape, and nothing left in etcd.
import test from 'ava';

import { ALL_VERSIONS, invoke } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctlOk, etcdKeys, ipamNetconf, totalAllocated } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';
import { atLeast } from '../../ts/cni/versions.ts';

test('every CNI version: ADD, CHECK and DEL a dual-stack pod on netplug-ipam', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'v4', '--cidr', '10.107.0.0/16');
  ctlOk(t, etcd, 'pool', 'create', 'v6', '--cidr', 'fd07::/48');
  for (const version of ALL_VERSIONS) {
    const call = {
      containerId: containerId(),
      netns: createNetns(t, 'ver').path,
      netconf: ipamNetconf(etcd, { version, ipam: { assign_ipv6: 'true' } }),
    };
    const add = invoke({ ...call, command: 'ADD' });
    t.is(add.status, 0, `${version}: ${add.stdout}`);
    t.is(add.json.cniVersion, version);
    const ips: string[] = atLeast(version, '0.3.0')
      ? add.json.ips.map((ip: { address: string }) => ip.address)
      : [add.json.ip4.ip, add.json.ip6.ip];
    t.true(
      ips[0]?.startsWith('10.107.') && ips[0].endsWith('/32') && ips[1]?.startsWith('fd07:') && ips[1].endsWith('/128'),
      `${version}: ${ips}`,
    );
    if (atLeast(version, '0.4.0'))
      t.is(invoke({ ...call, command: 'CHECK', netconf: { ...call.netconf, prevResult: add.json } }).status, 0, version);
    t.is(totalAllocated(t, etcd), 2, version);
    t.is(invoke({ ...call, command: 'DEL' }).status, 0, version);
    t.is(invoke({ ...call, command: 'DEL' }).status, 0, `${version}: DEL again`);
    t.is(totalAllocated(t, etcd), 0, version);
  }
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/v2/handle/'), []);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/resources/v3/projectnet.org/workloadendpoints/'), []);
});
