// Routes between nodes through the TypeScript facade, each test in a namespace of its own standing
// in for a node: the calls act on the calling process's namespace, so they run in a child process
// under `ip netns exec` (routes-in-netns.ts). The kernel is read back through iproute2.
import { execFileSync, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import test, { type ExecutionContext } from 'ava';

import { createNetns, ip, link, type TestNetns } from '../helpers/kernel.ts';

const CHILD = fileURLToPath(new URL('./routes-in-netns.ts', import.meta.url));

interface Outcome {
  value?: unknown;
  error?: { name: string; code?: string; op?: string; message: string };
}

/** Runs `calls` ([function, ...arguments]) one after another inside `netns`. */
function inNetns(netns: TestNetns, ...calls: unknown[][]): Outcome[] {
  const out = execFileSync('ip', ['netns', 'exec', netns.name, process.execPath, CHILD, JSON.stringify(calls)], {
    encoding: 'utf8',
  });
  return JSON.parse(out) as Outcome[];
}

/** The value of the one call, failing the test on an error. */
function value<T>(netns: TestNetns, call: unknown[]): T {
  const [outcome] = inNetns(netns, call);
  if (outcome?.error) throw new Error(`${String(call[0])}: ${outcome.error.message}`);
  return outcome?.value as T;
}

/** The error of the one call, failing the test if it succeeded. */
function failure(netns: TestNetns, call: unknown[]): NonNullable<Outcome['error']> {
  const [outcome] = inNetns(netns, call);
  if (!outcome?.error) throw new Error(`${String(call[0])} succeeded: ${JSON.stringify(outcome?.value)}`);
  return outcome.error;
}

/** An underlay link standing in for the node's NIC: a veth end, up, 192.168.50.1/24 and fd00:50::1/64. */
function underlay(netns: TestNetns): void {
  ip(['link', 'add', 'up0', 'type', 'veth', 'peer', 'name', 'up1'], netns);
  ip(['addr', 'add', '192.168.50.1/24', 'dev', 'up0'], netns);
  ip(['addr', 'add', 'fd00:50::1/64', 'dev', 'up0', 'nodad'], netns);
  ip(['link', 'set', 'up0', 'up'], netns);
  ip(['link', 'set', 'up1', 'up'], netns);
}

interface DetailedLink {
  ifindex: number;
  mtu: number;
  address: string;
  flags: string[];
  linkinfo?: { info_kind: string; info_data?: Record<string, unknown> };
}

function details(name: string, netns: TestNetns): DetailedLink | undefined {
  return link(name, netns) as unknown as DetailedLink | undefined;
}

function ipv4Addresses(dev: string, netns: TestNetns): string[] {
  const json = JSON.parse(ip(['-j', '-4', 'addr', 'show', 'dev', dev], netns)) as Array<{
    addr_info: Array<{ local: string; prefixlen: number }>;
  }>;
  return (json[0]?.addr_info ?? []).map((a) => `${a.local}/${a.prefixlen}`);
}

/** `dst [via gw] dev d [onlink]` of the main table's routes of `protocol`, both families, sorted. */
function routesOf(protocol: string, netns: TestNetns): string[] {
  const shown: string[] = [];
  for (const family of ['-4', '-6']) {
    const out = ip(['-j', family, 'route', 'show', 'table', 'main', 'proto', protocol], netns).trim();
    const routes = (out ? JSON.parse(out) : []) as Array<{ dst: string; gateway?: string; dev: string; flags: string[] }>;
    for (const r of routes) {
      const onlink = r.flags.includes('onlink') ? ' onlink' : '';
      shown.push(`${r.dst}${r.gateway ? ` via ${r.gateway}` : ''} dev ${r.dev}${onlink}`);
    }
  }
  return shown.sort();
}

const VXLAN = { name: 'vxnp', vni: 4096, port: 4789, local: '192.168.50.1', mtu: 1410, mac: '66:0a:00:00:00:0a' };

test('a VXLAN device with its attributes as ip -d link shows them; a second call changes nothing; deleteLink', (t) => {
  const netns = createNetns(t, 'vxlan');
  underlay(netns);
  const made = value<{ ifindex: number; mac: string }>(netns, ['ensureVxlanDevice', { ...VXLAN, address: '10.244.7.0/32' }]);
  const shown = details('vxnp', netns);
  t.is(shown?.ifindex, made.ifindex);
  t.is(made.mac, '66:0a:00:00:00:0a');
  t.is(shown?.linkinfo?.info_kind, 'vxlan');
  t.like(shown?.linkinfo?.info_data ?? {}, { id: 4096, port: 4789, local: '192.168.50.1', learning: false });
  t.like(shown, { mtu: 1410, address: '66:0a:00:00:00:0a' });
  t.true(shown?.flags.includes('UP'));
  t.deepEqual(ipv4Addresses('vxnp', netns), ['10.244.7.0/32']);

  t.deepEqual(value(netns, ['ensureVxlanDevice', { ...VXLAN, address: '10.244.7.0' }]), made);
  t.deepEqual(details('vxnp', netns), shown, 'the second call changed nothing');

  const [deleted, again] = inNetns(netns, ['deleteLink', 'vxnp'], ['deleteLink', 'vxnp']);
  t.deepEqual([deleted?.value, again?.value], [true, false]);
  t.is(details('vxnp', netns), undefined);
});

/** Whether this kernel makes IP-in-IP devices, asked of iproute2 in a namespace of its own. */
function kernelHasIpip(t: ExecutionContext): boolean {
  const probe = createNetns(t, 'ipip-probe');
  const out = spawnSync('ip', ['-n', probe.name, 'link', 'add', 'tunl0', 'type', 'ipip'], { encoding: 'utf8' });
  return out.status === 0 || out.stderr.includes('File exists');
}

test('an IP-in-IP device without a remote, or an error naming the missing driver', (t) => {
  const netns = createNetns(t, 'ipip');
  const spec = { name: 'tunl0', mtu: 1440, address: '10.244.9.0' };
  if (!kernelHasIpip(t)) {
    const err = failure(netns, ['ensureIpipDevice', spec]);
    t.like(err, { name: 'DataplaneError', code: 'EOPNOTSUPP', op: 'ensure IP-in-IP device "tunl0"' });
    t.regex(err.message, /this kernel has no ipip \(CONFIG_NET_IPIP\) driver/);
    t.is(details('tunl0', netns), undefined, 'nothing left behind');
    return;
  }
  const made = value<{ ifindex: number }>(netns, ['ensureIpipDevice', spec]);
  const shown = details('tunl0', netns);
  t.is(shown?.ifindex, made.ifindex);
  t.is(shown?.linkinfo?.info_kind, 'ipip');
  t.like(shown, { mtu: 1440 });
  t.true(shown?.flags.includes('UP'));
  t.deepEqual(ipv4Addresses('tunl0', netns), ['10.244.9.0/32']);
  t.deepEqual(value(netns, ['ensureIpipDevice', spec]), made);
  t.deepEqual(details('tunl0', netns), shown, 'the second call changed nothing');
});

test('syncRoutes: added, then unchanged, replaced and removed; a route of another protocol is never touched', (t) => {
  const netns = createNetns(t, 'routes');
  underlay(netns);
  ip(['route', 'add', '10.99.0.0/24', 'via', '192.168.50.9', 'dev', 'up0', 'proto', 'static'], netns);
  ip(['route', 'add', '10.98.0.0/24', 'via', '192.168.50.9', 'dev', 'up0', 'proto', '80'], netns);
  const statics = routesOf('static', netns);
  const wanted = [
    { dst: '10.244.1.0/26', via: '192.168.50.2', dev: 'up0' },
    { dst: '10.244.2.0/26', via: '172.16.0.5', dev: 'up0', onlink: true },
    { dst: 'fd00:244:1::/122', via: 'fd00:50::2', dev: 'up0' },
  ];
  const [first, second] = inNetns(netns, ['syncRoutes', 80, wanted], ['syncRoutes', 80, wanted]);
  t.deepEqual(first?.value, { added: 3, replaced: 0, removed: 1, unchanged: 0 });
  t.deepEqual(second?.value, { added: 0, replaced: 0, removed: 0, unchanged: 3 }, 'the second sync changes nothing');
  t.deepEqual(routesOf('80', netns), [
    '10.244.1.0/26 via 192.168.50.2 dev up0',
    '10.244.2.0/26 via 172.16.0.5 dev up0 onlink',
    'fd00:244:1::/122 via fd00:50::2 dev up0',
  ]);

  const moved = [{ ...wanted[0], via: '192.168.50.3' }, wanted[2]];
  t.deepEqual(value(netns, ['syncRoutes', 80, moved]), { added: 0, replaced: 1, removed: 1, unchanged: 1 });
  t.deepEqual(routesOf('80', netns), ['10.244.1.0/26 via 192.168.50.3 dev up0', 'fd00:244:1::/122 via fd00:50::2 dev up0']);

  const conflict = failure(netns, ['syncRoutes', 80, [{ dst: '10.99.0.0/24', via: '192.168.50.2', dev: 'up0' }]]);
  t.is(conflict.code, 'EEXIST');
  t.regex(conflict.message, /route to 10\.99\.0\.0\/24 exists with another protocol; left alone/);
  t.deepEqual(routesOf('80', netns), [], 'the other routes of protocol 80 were still synced (to none)');
  t.deepEqual(routesOf('static', netns), statics, 'the static route was never touched');
});

test('syncNeighbors and syncFdb make the VXLAN device’s entries exactly the ones given', (t) => {
  const netns = createNetns(t, 'fdb');
  underlay(netns);
  value(netns, ['ensureVxlanDevice', VXLAN]);
  const neighbors = [
    { ip: '10.244.8.0', mac: '66:0a:00:00:00:0b' },
    { ip: '10.244.9.0', mac: '66:0a:00:00:00:0c' },
  ];
  const fdb = [
    { mac: '66:0a:00:00:00:0b', dst: '192.168.50.2' },
    { mac: '66:0a:00:00:00:0c', dst: '192.168.50.3' },
  ];
  const outcomes = inNetns(
    netns,
    ['syncNeighbors', 'vxnp', neighbors],
    ['syncNeighbors', 'vxnp', neighbors],
    ['syncFdb', 'vxnp', fdb],
    ['syncFdb', 'vxnp', fdb],
  );
  t.deepEqual(
    outcomes.map((o) => o.value),
    [
      { added: 2, removed: 0 },
      { added: 0, removed: 0 },
      { added: 2, removed: 0 },
      { added: 0, removed: 0 },
    ],
  );
  const neigh = JSON.parse(ip(['-j', 'neigh', 'show', 'dev', 'vxnp'], netns)) as Array<{ dst: string; lladdr: string; state: string[] }>;
  t.deepEqual(neigh.map((n) => `${n.dst} ${n.lladdr} ${n.state.join(',')}`).sort(), [
    '10.244.8.0 66:0a:00:00:00:0b PERMANENT',
    '10.244.9.0 66:0a:00:00:00:0c PERMANENT',
  ]);
  const entries = JSON.parse(
    execFileSync('ip', ['netns', 'exec', netns.name, 'bridge', '-j', 'fdb', 'show', 'dev', 'vxnp'], { encoding: 'utf8' }),
  ) as Array<{ mac: string; dst?: string; state?: string }>;
  t.deepEqual(entries.map((e) => `${e.mac} ${e.dst} ${e.state}`).sort(), [
    '66:0a:00:00:00:0b 192.168.50.2 permanent',
    '66:0a:00:00:00:0c 192.168.50.3 permanent',
  ]);

  const [neighborsNow, fdbNow] = inNetns(netns, ['syncNeighbors', 'vxnp', neighbors.slice(1)], ['syncFdb', 'vxnp', []]);
  t.deepEqual(
    [neighborsNow?.value, fdbNow?.value],
    [
      { added: 0, removed: 1 },
      { added: 0, removed: 2 },
    ],
  );
});

test('bad input is a DataplaneError naming the field and the value, and changes nothing', (t) => {
  const netns = createNetns(t, 'input');
  underlay(netns);
  const errors = inNetns(
    netns,
    ['syncRoutes', 80, [{ dst: '10.0.0.300/24', dev: 'up0' }]],
    ['syncRoutes', 80, [{ dst: '10.244.1.0/26', via: 'not-an-ip', dev: 'up0' }]],
    ['syncRoutes', 80, [{ dst: '10.244.1.0/26', dev: 'nope0' }]],
    ['syncRoutes', 300, []],
    ['ensureVxlanDevice', { ...VXLAN, local: '192.168.50' }],
    ['ensureVxlanDevice', { ...VXLAN, mac: 'ff:ff:ff:ff:ff:ff' }],
    ['ensureVxlanDevice', { ...VXLAN, address: '10.244.7.0/24' }],
    ['syncNeighbors', 'vxnp', []],
    ['syncFdb', 'up0', [{ mac: '66:0a:00:00:00:0b', dst: '192.168.50.2' }]],
    ['syncNeighbors', 'up0', [{ ip: '10.244.8.0', mac: '66:0a' }]],
  ).map((o) => o.error);
  t.true(
    errors.every((e) => e?.name === 'DataplaneError'),
    JSON.stringify(errors),
  );
  t.deepEqual(
    errors.map((e) => `${e?.code} ${e?.message}`),
    [
      'EINVAL sync routes of protocol 80: routes[0].dst "10.0.0.300/24" is not a CIDR [EINVAL]',
      'EINVAL sync routes of protocol 80: routes[0].via "not-an-ip" is not an IP address [EINVAL]',
      'ENODEV sync routes of protocol 80: routes[0].dev "nope0": no such device [ENODEV]',
      'EINVAL sync routes of protocol 300: protocol 300 is out of range (5-255) [EINVAL]',
      'EINVAL ensure VXLAN device "vxnp": local "192.168.50" is not an IP address [EINVAL]',
      'EINVAL ensure VXLAN device "vxnp": mac "ff:ff:ff:ff:ff:ff" is not a unicast MAC address [EINVAL]',
      'EINVAL ensure VXLAN device "vxnp": address "10.244.7.0/24" must be a single address (/32) [EINVAL]',
      'ENODEV sync neighbour entries on "vxnp": dev "vxnp": no such device [ENODEV]',
      'EINVAL sync FDB entries of "up0": dev "up0" is a veth device, not VXLAN [EINVAL]',
      'EINVAL sync neighbour entries on "up0": entries[0].mac "66:0a" is not a MAC address such as 0a:58:0a:f4:00:05 [EINVAL]',
    ],
  );
  t.is(details('vxnp', netns), undefined, 'no device was made');
  t.deepEqual(routesOf('80', netns), []);
});
