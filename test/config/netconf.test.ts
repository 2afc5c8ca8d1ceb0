// The netconf schema: every field of the specification's tables with its default, unknown fields
// kept for chaining, the IPAM section checked as received.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import test from 'ava';

import { defaultRouteMtu } from '../../ts/config/mtu.ts';
import { parseNetconf } from '../../ts/config/netconf.ts';

const parse = (json: unknown) => parseNetconf(Buffer.from(JSON.stringify(json)));
const minimal = { cniVersion: '1.0.0', name: 'k8s-pod-network', type: 'netplug', ipam: { type: 'netplug-ipam' } };

test('the spec minimal netconf gets every default', (t) => {
  const { conf } = parse(minimal);
  t.like(conf, {
    datastore_type: 'etcdv3',
    etcd_authority: '127.0.0.1:2379',
    etcd_scheme: 'http',
    log_level: 'INFO',
    log_file_max_size: 100,
    log_file_max_age: 30,
    log_file_max_count: 10,
    container_settings: { allow_ip_forwarding: false },
    feature_control: { ip_addrs_no_ipam: false, floating_ips: false },
    endpoint_status_dir: '/var/run/netplug/endpoint-status',
    num_queues: 1,
    policy_setup_timeout_seconds: 0,
    ipam: { type: 'netplug-ipam', assign_ipv4: 'true', assign_ipv6: 'false' },
  });
  t.is(conf.log_file_path, undefined, 'no log file unless one is configured');
});

test('a netconf without cniVersion is 0.2.0, as libcni treats it', (t) => {
  const { cniVersion, ...rest } = minimal;
  t.is(parse(rest).conf.cniVersion, '0.2.0');
});

test('unknown fields pass through untouched', (t) => {
  const input = { ...minimal, runtimeConfig: { portMappings: [] }, somePluginOption: { deep: [1, 2] } };
  const parsed = parse(input);
  t.deepEqual(parsed.json, input);
  t.is(parsed.raw.toString(), JSON.stringify(input));
});

test('the IPAM section is checked as received, not as the typed view keeps it', (t) => {
  t.throws(() => parse({ ...minimal, ipam: { type: 'netplug-ipam', assign_ipv6: false } }), {
    message: /"ipam\.assign_ipv6" must be the string "true" or "false", not a JSON boolean/,
  });
  t.throws(() => parse({ ...minimal, ipam: { type: 'netplug-ipam', ipv4_pools: ['pool-a', ''] } }), {
    message: /"ipam\.ipv4_pools\[1\]" must name a pool or give its CIDR/,
  });
  t.throws(() => parse({ ...minimal, ipam: { type: 'host-local', routes: [{ dst: 'default' }] } }), {
    message: /"ipam\.routes\[0\]\.dst" must be a CIDR/,
  });
  t.like(parse({ ...minimal, ipam: { type: 'netplug-ipam', assign_ipv6: 'true', ipv6_pools: ['fd00::/64'] } }).conf.ipam, {
    assign_ipv4: 'true',
    assign_ipv6: 'true',
    ipv6_pools: ['fd00::/64'],
  });
});

test('log_level is one of four, in any case', (t) => {
  t.is(parse({ ...minimal, log_level: 'warning' }).conf.log_level, 'WARNING');
  t.throws(() => parse({ ...minimal, log_level: 'WARN' }), { message: /must be one of ERROR, WARNING, INFO, DEBUG, got "WARN"/ });
});

test('mutual TLS needs key and certificate together', (t) => {
  t.throws(() => parse({ ...minimal, etcd_cert_file: '/etc/netplug/cert.pem' }), { message: /"etcd_cert_file" needs its partner/ });
  t.notThrows(() => parse({ ...minimal, etcd_cert_file: '/c.pem', etcd_key_file: '/k.pem', etcd_ca_cert_file: '/ca.pem' }));
});

test('readiness gates are http(s) URLs; a negative policy timeout is refused', (t) => {
  t.throws(() => parse({ ...minimal, readiness_gates: 'http://x' }), { message: /"readiness_gates" must be an array/ });
  t.throws(() => parse({ ...minimal, policy_setup_timeout_seconds: -1 }), {
    message: /"policy_setup_timeout_seconds" must be at least 0, got -1/,
  });
});

const refusal = (json: unknown) => {
  try {
    parse(json);
  } catch (err) {
    return err as { code: number; message: string; details?: string };
  }
  throw new Error('accepted');
};

test('"mtu": 0 is auto: the MTU file when it holds one, the host default route otherwise; 1 to 67 are refused', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'nptest-mtu-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'mtu');
  writeFileSync(file, '1410\n');
  t.is(parse({ ...minimal, mtu: 0, mtu_file: file }).conf.mtu, 1410);
  writeFileSync(file, 'not a number');
  t.is(parse({ ...minimal, mtu: 0, mtu_file: file }).conf.mtu, defaultRouteMtu() ?? 1500, 'an unusable file gives way');
  t.is(parse({ ...minimal, mtu: 0, mtu_file: join(dir, 'absent') }).conf.mtu, defaultRouteMtu() ?? 1500);
  t.is(parse({ ...minimal, mtu: 1400, mtu_file: file }).conf.mtu, 1400, 'a set MTU is kept');
  t.is(parse({ ...minimal, mtu_file: join(dir, 'absent') }).conf.mtu, undefined, 'absent without the file: the kernel default');
  writeFileSync(file, '9000');
  t.is(parse({ ...minimal, mtu_file: file }).conf.mtu, 9000, 'absent with the file: the file');
  t.regex(refusal({ ...minimal, mtu: 67 }).message, /netconf field "mtu" must be 0 \(auto\) or from 68 to 65535, got 67/);
});

test('"" for the etcd TLS files, as install-cni renders them without TLS, means unset', (t) => {
  const { conf } = parse({
    ...minimal,
    etcd_endpoints: 'http://127.0.0.1:2379',
    etcd_key_file: '',
    etcd_cert_file: '',
    etcd_ca_cert_file: '',
  });
  t.is(conf.etcd_key_file, undefined);
  t.is(conf.etcd_cert_file, undefined);
  t.is(conf.etcd_ca_cert_file, undefined);
  t.regex(refusal({ ...minimal, etcd_key_file: '', etcd_cert_file: '/c.pem' }).message, /"etcd_cert_file" needs its partner/);
});

test('etcd_endpoints must list at least one http(s) URL', (t) => {
  for (const endpoints of [',,,', '', ' , ']) {
    const error = refusal({ ...minimal, etcd_endpoints: endpoints });
    t.is(error.code, 7);
    t.regex(error.message, /netconf field "etcd_endpoints" must list at least one endpoint URL/);
  }
  t.regex(
    refusal({ ...minimal, etcd_endpoints: 'http://a:2379,etcd-b:2379' }).message,
    /"etcd_endpoints" must be http:\/\/ or https:\/\/ URLs/,
  );
  t.is(parse({ ...minimal, etcd_endpoints: 'http://a:2379,,https://b:2379,' }).conf.etcd_endpoints, 'http://a:2379,,https://b:2379,');
});

test('node names are DNS-1123 subdomains, as Kubernetes has them', (t) => {
  for (const bad of ['a/b', '../../x', '\ud800', 'Node-A', '-a', 'a-', 'a..b', 'x'.repeat(254), '']) {
    const error = refusal({ ...minimal, nodename: bad });
    t.is(error.code, 7);
    t.regex(error.message, /^netconf field "nodename" must be a Kubernetes node name \(a DNS-1123 subdomain/);
    t.true(error.message.includes(JSON.stringify(bad).slice(0, 100)) || bad.length > 200, error.message);
    t.regex(
      refusal({ ...minimal, kubernetes: { node_name: bad } }).message,
      /^netconf field "kubernetes\.node_name" must be a Kubernetes node name/,
    );
  }
  for (const good of ['node-a', 'ip-10-0-0-1.ec2.internal', '0', 'x'.repeat(63)]) {
    t.is(parse({ ...minimal, nodename: good }).conf.nodename, good);
  }
});

test('values nested 100,000 deep in any field are a field error, not a stack overflow', (t) => {
  const deep = '['.repeat(100_000) + ']'.repeat(100_000);
  for (const field of ['mtu', 'ipam', 'prevResult', 'somePluginOption']) {
    const raw = `{"cniVersion":"1.0.0","name":"n","type":"netplug","ipam":{"type":"netplug-ipam"},"${field}":${deep}}`.replace(
      `"ipam":{"type":"netplug-ipam"},"ipam":`,
      '"ipam":',
    );
    const error = t.throws(() => parseNetconf(Buffer.from(raw))) as unknown as { code: number; message: string };
    t.is(error.code, 7);
    t.is(error.message, `netconf field "${field}" nests values more than 64 levels deep; netplug refuses such input`);
  }
  const fine = { ...minimal, runtimeConfig: { a: [[[[{ b: [[1]] }]]]] } };
  t.deepEqual(parse(fine).json, fine, 'ordinary nesting passes');
});

test('ipam.type "netplug" is refused: netplug would run itself without end', (t) => {
  const error = refusal({ ...minimal, ipam: { type: 'netplug' } });
  t.is(error.code, 7);
  t.regex(error.message, /netconf field "ipam\.type" is "netplug": netplug cannot delegate address management to itself/);
});

test('error messages repeat at most 200 characters of a value, with its length', (t) => {
  const huge = `${'x'.repeat(2 * 1024 * 1024)}/`;
  for (const json of [
    { ...minimal, name: huge },
    { ...minimal, nodename: huge },
    { ...minimal, cniVersion: huge },
    { ...minimal, log_level: huge },
    { ...minimal, ipam: { type: 'host-local', subnet: huge } },
  ]) {
    const error = refusal(json);
    t.true(error.message.length < 600, `${error.message.length} characters`);
    t.true((error.details ?? '').length < 4200);
    t.regex(error.message, /x{199}\.\.\. \(209715\d characters\)/);
  }
});

test('host-local sections host-local itself would refuse are field errors (found by the fuzz suite)', (t) => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ type: 'host-local' }, /netconf field "ipam" host-local needs "subnet" or "ranges"/],
    [{ type: 'host-local', ranges: [] }, /netconf field "ipam\.ranges" must list at least one range set/],
    [{ type: 'host-local', ranges: [[]] }, /netconf field "ipam\.ranges\[0\]" must not hold an empty range set/],
    [{ type: 'host-local', subnet: '10.0.0.0/24', dataDir: 'a\u0000b' }, /netconf field "ipam\.dataDir" must be a directory path/],
    [{ type: 'host-local', subnet: '10.0.0.0/24', dataDir: 5 }, /netconf field "ipam\.dataDir" must be a string/],
  ];
  for (const [ipam, message] of cases) t.throws(() => parse({ ...minimal, ipam }), { message }, JSON.stringify(ipam));
  t.notThrows(() => parse({ ...minimal, ipam: { type: 'host-local', ranges: [[{ subnet: '10.0.0.0/24' }]], dataDir: '/tmp/x' } }));
});

test('a key given twice in one object is refused, naming it: netplug and Go plugins would read different netconfs', (t) => {
  const text = (ipam: string) => Buffer.from(`{"cniVersion":"1.0.0","name":"n","type":"netplug","ipam":${ipam}}`);
  t.throws(() => parseNetconf(text('{"type":["host-local"],"type":"host-local","subnet":"10.0.0.0/24"}')), {
    message: /^netconf field "ipam\.type" is given twice/,
  });
  t.throws(
    () => parseNetconf(text('{"type":"host-local","subnet":"10.0.0.0/24","routes":[{"dst":"0.0.0.0/0"},{"dst":["x"],"dst":"::/0"}]}')),
    {
      message: /^netconf field "ipam\.routes\[1\]\.dst" is given twice/,
    },
  );
  // The same name in different objects, or inside strings, is no repetition.
  t.notThrows(() =>
    parseNetconf(
      text('{"type":"host-local","subnet":"10.0.0.0/24","routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0"}],"x":"\\"type\\":1,\\"type\\""}'),
    ),
  );
});

test('a netconf given again (an agent serves the same one to every pod) parses as the first time, into a copy of its own, its MTU file read again', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'netplug-netconf-again-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const mtuFile = join(dir, 'mtu');
  writeFileSync(mtuFile, '1450\n');
  const given = {
    ...minimal,
    mtu: 0,
    mtu_file: mtuFile,
    log_file_path: '',
    kubernetes: { kubeconfig: '/etc/cni/net.d/netplug-kubeconfig' },
    policy: { type: 'k8s' },
    ipam: { type: 'netplug-ipam', ipv4_pools: ['10.0.0.0/16'] },
  };
  const first = parse(given);
  const again = parse(given);
  t.deepEqual(again, first);
  t.is(again.conf.mtu, 1450);
  t.not(again.conf, first.conf);
  (first.conf.kubernetes as { kubeconfig?: string }).kubeconfig = '/changed';
  (first.json['ipam'] as Record<string, unknown>)['type'] = 'host-local';
  const third = parse(given);
  t.is(third.conf.kubernetes?.kubeconfig, '/etc/cni/net.d/netplug-kubeconfig', "one call's changes are not the next call's");
  t.is((third.json['ipam'] as Record<string, unknown>)['type'], 'netplug-ipam');
  writeFileSync(mtuFile, '1400\n');
  t.is(parse(given).conf.mtu, 1400, 'the MTU follows the file');
  // A DEL's netconf carries its pod's prevResult: each is parsed as given.
  for (const ip of ['10.0.0.5/32', '10.0.0.6/32']) {
    const withPrevious = { ...given, prevResult: { cniVersion: '1.1.0', ips: [{ address: ip }] } };
    t.deepEqual(parse(withPrevious).json['prevResult'], withPrevious.prevResult);
    t.is(parse(withPrevious).conf.kubernetes?.kubeconfig, '/etc/cni/net.d/netplug-kubeconfig');
  }
  // What fails validation fails every time.
  const bad = { ...given, log_level: 'loud' };
  t.throws(() => parse(bad), { message: /log_level/ });
  t.throws(() => parse(bad), { message: /log_level/ });
});
