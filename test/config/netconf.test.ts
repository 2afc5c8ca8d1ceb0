// The netconf schema: every field of the specification's tables with its default, unknown fields
// kept for chaining, the IPAM section checked as received.
import test from 'ava';

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
