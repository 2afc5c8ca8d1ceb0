// ADD, CHECK and DEL through the built executable for every CNI version a runtime may speak,
// with host-local IPAM: the result's shape for that version, the kernel state, traffic, and an
// idempotent DEL.
import test from 'ava';

import { ALL_VERSIONS, hostLocalNetconf, hostVeth, invoke, reservations, tempDir } from '../helpers/cni.ts';
import { addresses, containerId, createNetns, link, ping, routes, uniqueSubnet4, uniqueSubnet6 } from '../helpers/kernel.ts';
import { atLeast } from '../../ts/cni/versions.ts';

for (const version of ALL_VERSIONS) {
  test(`CNI ${version}: ADD, CHECK and DEL a dual-stack pod`, (t) => {
    const netns = createNetns(t, `v${version}`);
    const dataDir = tempDir(t, 'hl');
    const id = containerId();
    const host = hostVeth(id);
    const netconf = hostLocalNetconf({ version, dataDir, ranges: [[{ subnet: uniqueSubnet4() }], [{ subnet: uniqueSubnet6() }]] });
    const call = { netconf, containerId: id, netns: netns.path };

    const add = invoke({ ...call, command: 'ADD' });
    t.is(add.status, 0, add.stdout);
    const result = add.json;
    t.is(result.cniVersion, version);
    let v4: string;
    let v6: string;
    if (!atLeast(version, '0.3.0')) {
      t.false('interfaces' in result, 'no interfaces before 0.3.0');
      t.regex(result.ip4.ip, /^100\.\d+\.\d+\.\d+\/32$/);
      t.regex(result.ip6.ip, /^fd00:.*\/128$/);
      t.deepEqual(result.ip4.routes, [{ dst: '0.0.0.0/0', gw: '169.254.1.1' }]);
      t.deepEqual(result.ip6.routes, [{ dst: '::/0', gw: 'fe80::ecee:eeff:feee:eeee' }]);
      [v4, v6] = [result.ip4.ip, result.ip6.ip];
    } else {
      t.deepEqual(result.interfaces[0], { name: host, mac: 'ee:ee:ee:ee:ee:ee' });
      t.like(result.interfaces[1], { name: 'eth0', sandbox: netns.path });
      t.regex(result.interfaces[1].mac, /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
      t.is(result.interfaces[1].mtu, atLeast(version, '1.1.0') ? 1500 : undefined, 'interface MTU only from 1.1.0');
      t.is(result.ips.length, 2);
      for (const ip of result.ips) {
        t.is(ip.interface, 1, 'addresses point at the container interface');
        t.is(ip.version, atLeast(version, '1.0.0') ? undefined : ip.address.includes(':') ? '6' : '4', 'ips[].version only before 1.0.0');
        t.is(ip.gateway, undefined, 'no gateway: the next hop is link-local');
      }
      t.deepEqual(result.routes, [
        { dst: '0.0.0.0/0', gw: '169.254.1.1' },
        { dst: '::/0', gw: 'fe80::ecee:eeff:feee:eeee' },
      ]);
      [v4, v6] = [result.ips[0].address, result.ips[1].address];
    }
    t.truthy(link(host), 'host end exists');
    t.deepEqual(
      addresses('eth0', netns)
        .filter((a) => !a.startsWith('fe80'))
        .sort(),
      [v4, v6].sort(),
    );
    t.true(routes(4, netns).includes('default via 169.254.1.1 dev eth0'));
    t.true(ping(v4.split('/')[0] ?? '') && ping(v6.split('/')[0] ?? ''), 'the host reaches both addresses');
    t.is(reservations(dataDir).length, 2);

    if (atLeast(version, '0.4.0')) {
      const check = invoke({ ...call, command: 'CHECK', netconf: { ...netconf, prevResult: result } });
      t.is(check.status, 0, check.stdout);
      t.is(check.stdout, '');
    }

    const withPrev = atLeast(version, '0.4.0') ? { ...netconf, prevResult: result } : netconf;
    const del = invoke({ ...call, command: 'DEL', netconf: withPrev });
    t.is(del.status, 0, del.stdout);
    t.is(del.stdout, '');
    t.is(link(host), undefined, 'host end removed');
    t.is(link('eth0', netns), undefined, 'pod end removed');
    t.deepEqual(reservations(dataDir), [], 'addresses released');

    t.is(invoke({ ...call, command: 'DEL', netconf: withPrev }).status, 0, 'DEL again succeeds');
    t.is(invoke({ ...call, command: 'DEL', netconf, netns: '' }).status, 0, 'DEL with an empty CNI_NETNS succeeds');
  });
}
