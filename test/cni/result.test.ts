// Result conversion, checked against the shapes of the CNI specification's examples
// (containernetworking/cni SPEC.md and pkg/types/{020,040,100}).
import test from 'ava';

import { formatResult, parseResult, type Result } from '../../ts/cni/result.ts';

const result: Result = {
  cniVersion: '1.1.0',
  interfaces: [
    { name: 'cali1', mac: 'ee:ee:ee:ee:ee:ee' },
    { name: 'eth0', mac: '99:88:77:66:55:44', mtu: 1400, sandbox: '/var/run/netns/blue' },
  ],
  ips: [
    { address: '10.1.0.5/32', interface: 1 },
    { address: 'fd00::5/128', interface: 1 },
    { address: '10.1.0.6/32', interface: 1 },
  ],
  routes: [
    { dst: '0.0.0.0/0', gw: '169.254.1.1', mtu: 1400 },
    { dst: '::/0', gw: 'fe80::ecee:eeff:feee:eeee' },
  ],
  dns: { nameservers: ['10.1.0.1'] },
};

test('1.1.0 keeps interface and route attributes', (t) => {
  t.deepEqual(formatResult(result, '1.1.0'), { ...result, cniVersion: '1.1.0' });
});

test('1.0.0 drops what 1.1.0 added', (t) => {
  const out = formatResult(result, '1.0.0') as any;
  t.deepEqual(out.interfaces[1], { name: 'eth0', mac: '99:88:77:66:55:44', sandbox: '/var/run/netns/blue' });
  t.deepEqual(out.routes[0], { dst: '0.0.0.0/0', gw: '169.254.1.1' });
  t.deepEqual(out.ips[0], { interface: 1, address: '10.1.0.5/32' });
});

for (const version of ['0.3.0', '0.3.1', '0.4.0']) {
  test(`${version} adds ips[].version`, (t) => {
    const out = formatResult(result, version) as any;
    t.is(out.cniVersion, version);
    t.deepEqual(
      out.ips.map((ip: any) => ip.version),
      ['4', '6', '4'],
    );
  });
}

for (const version of ['0.1.0', '0.2.0']) {
  test(`${version} takes the first address of each family, with its family's routes`, (t) => {
    t.deepEqual(formatResult(result, version), {
      cniVersion: version,
      ip4: { ip: '10.1.0.5/32', routes: [{ dst: '0.0.0.0/0', gw: '169.254.1.1' }] },
      ip6: { ip: 'fd00::5/128', routes: [{ dst: '::/0', gw: 'fe80::ecee:eeff:feee:eeee' }] },
      dns: { nameservers: ['10.1.0.1'] },
    });
  });
}

test('a 0.2.0 result reads back into the model', (t) => {
  const read = parseResult(
    { cniVersion: '0.2.0', ip4: { ip: '10.0.0.2/24', gateway: '10.0.0.1', routes: [{ dst: '0.0.0.0/0' }] } },
    '0.2.0',
    'test',
  );
  t.deepEqual(read, { cniVersion: '0.2.0', ips: [{ address: '10.0.0.2/24', gateway: '10.0.0.1' }], routes: [{ dst: '0.0.0.0/0' }] });
});

test('a 0.4.0 result reads back without ips[].version', (t) => {
  const read = parseResult(formatResult(result, '0.4.0'), '0.4.0', 'test');
  t.deepEqual(read.ips, [
    { address: '10.1.0.5/32', interface: 1 },
    { address: 'fd00::5/128', interface: 1 },
    { address: '10.1.0.6/32', interface: 1 },
  ]);
});

test('a malformed result names what is wrong', (t) => {
  const err = t.throws(() => parseResult({ ips: [{ addr: 'x' }] }, '1.0.0', 'prevResult'));
  t.regex(err?.message ?? '', /prevResult is not a CNI 1\.0\.0 result: ips\.0\.address/);
});

test('0.2.0 cannot carry a result without addresses', (t) => {
  t.throws(() => formatResult({ cniVersion: '1.0.0' }, '0.2.0'), { message: /cannot be expressed in CNI 0\.2\.0/ });
});
