// The etcd settings of the netconf through the built executables: mutual TLS with a bundle of
// roots, SRV discovery, the deprecated authority and scheme, and settings that cannot work.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { invoke, NETPLUG, ROOT, tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { addressesOf, ctl, ctlOk, ipamNetconf, totalAllocated } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';

test('mutual TLS: ADD and DEL through a trust bundle of several roots; a stranger certificate is refused', async (t) => {
  const etcd = await startEtcd(t, { tls: true });
  const certs = etcd.certs;
  if (!certs) throw new Error('no certificates');
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.101.0.0/16');
  const call = { containerId: containerId(), netns: createNetns(t, 'tls').path, netconf: ipamNetconf(etcd) };
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 0, add.stdout);
  t.true(addressesOf(add.json)[0]?.startsWith('10.101.'));
  t.is(totalAllocated(t, etcd), 1);
  t.is(invoke({ ...call, command: 'DEL' }).status, 0);
  t.is(totalAllocated(t, etcd), 0);

  const stranger = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: createNetns(t, 'tls').path,
    netconf: { ...call.netconf, etcd_cert_file: certs.strangerCert, etcd_key_file: certs.strangerKey },
  });
  t.is(stranger.json.code, 100, stranger.stdout);
  t.regex(stranger.json.msg, /TLS with etcd at https:\/\/127\.0\.0\.1:\d+ failed: .*BadCertificate/);
  const { etcd_ca_cert_file: _, ...withoutBundle } = call.netconf as Record<string, unknown>;
  const untrusted = invoke({ command: 'ADD', containerId: containerId(), netns: createNetns(t, 'tls').path, netconf: withoutBundle });
  t.is(untrusted.json.code, 100, untrusted.stdout);
  t.regex(untrusted.json.msg, /TLS with etcd at https:\/\/127\.0\.0\.1:\d+ failed: .*(certificate|issuer)/i);
  const notPem = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: createNetns(t, 'tls').path,
    netconf: { ...call.netconf, etcd_ca_cert_file: '/etc/hostname' },
  });
  t.is(notPem.json.code, 7);
  t.is(notPem.json.msg, 'netconf field "etcd_ca_cert_file": /etc/hostname: no certificate in it');
  t.is(totalAllocated(t, etcd), 0, 'refused ADDs took nothing');
});

/** dnsmasq on its own loopback address, answering for netplug.test; stopped at teardown. */
async function dnsServer(t: ExecutionContext, records: string[]): Promise<string> {
  execFileSync('sh', ['scripts/ensure-packages.sh', 'dnsmasq-base'], { cwd: ROOT, stdio: 'ignore' });
  const address = `127.0.${(process.pid % 200) + 20}.53`;
  const server = spawn(
    'dnsmasq',
    [
      '--keep-in-foreground',
      '--conf-file=/dev/null',
      '--no-resolv',
      '--no-hosts',
      `--listen-address=${address}`,
      '--bind-interfaces',
      '--port=53',
      '--user=root',
      ...records,
    ],
    { stdio: 'ignore' },
  );
  t.teardown(() => {
    server.kill('SIGKILL');
  });
  await eventually('dnsmasq to answer', () => probe(address), { intervalMs: 50 });
  return address;
}

async function probe(address: string): Promise<boolean> {
  const { Resolver } = await import('node:dns/promises');
  const resolver = new Resolver({ timeout: 200, tries: 1 });
  resolver.setServers([address]);
  return resolver.resolve4('etcd.netplug.test').then(
    () => true,
    () => false,
  );
}

/** The executable in a mount namespace whose /etc/resolv.conf names only `nameserver`. */
function invokeWithResolver(
  t: ExecutionContext,
  nameserver: string,
  command: string,
  call: { containerId: string; netns: string; netconf: unknown },
) {
  const dir = tempDir(t, 'dns');
  writeFileSync(join(dir, 'resolv.conf'), `nameserver ${nameserver}\n`);
  const run = spawnSync(
    'unshare',
    ['--mount', '--propagation', 'private', 'sh', '-c', `mount --bind ${join(dir, 'resolv.conf')} /etc/resolv.conf && exec ${NETPLUG}`],
    {
      input: JSON.stringify(call.netconf),
      encoding: 'utf8',
      env: {
        PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
        CNI_COMMAND: command,
        CNI_CONTAINERID: call.containerId,
        CNI_NETNS: call.netns,
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/usr/lib/cni',
      },
      timeout: 60_000,
    },
  );
  return { status: run.status, stdout: run.stdout, json: run.stdout.trim() ? JSON.parse(run.stdout) : undefined };
}

test('etcd_discovery_srv: the endpoints come from SRV records (https ones with TLS)', async (t) => {
  const etcd = await startEtcd(t, { tls: true, dnsName: 'etcd.netplug.test' });
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.102.0.0/16');
  const dns = await dnsServer(t, [
    `--srv-host=_etcd-client-ssl._tcp.netplug.test,etcd.netplug.test,${etcd.port}`,
    '--host-record=etcd.netplug.test,127.0.0.1',
  ]);
  const { etcd_endpoints: _, ...tls } = etcd.netconf;
  const netconf = { ...ipamNetconf(etcd), etcd_endpoints: undefined, ...tls, etcd_discovery_srv: 'netplug.test' };
  const call = { containerId: containerId(), netns: createNetns(t, 'srv').path, netconf };
  const add = invokeWithResolver(t, dns, 'ADD', call);
  t.is(add.status, 0, add.stdout);
  t.true(addressesOf(add.json)[0]?.startsWith('10.102.'));
  t.is(invokeWithResolver(t, dns, 'DEL', call).status, 0);
  t.is(totalAllocated(t, etcd), 0);
  const nothing = invokeWithResolver(t, dns, 'ADD', { ...call, netconf: { ...netconf, etcd_discovery_srv: 'elsewhere.test' } });
  t.is(nothing.json.code, 11);
  t.regex(nothing.json.msg, /etcd_discovery_srv "elsewhere\.test": no SRV records found/);
});

test('the deprecated etcd_authority and etcd_scheme, used only without etcd_endpoints', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.103.0.0/16');
  const { etcd_endpoints: _, ...rest } = ipamNetconf(etcd) as Record<string, unknown>;
  const netconf = { ...rest, etcd_authority: `127.0.0.1:${etcd.port}`, etcd_scheme: 'http' };
  const call = { containerId: containerId(), netns: createNetns(t, 'old').path, netconf };
  t.is(invoke({ ...call, command: 'ADD' }).status, 0);
  t.is(totalAllocated(t, etcd), 1);
  t.is(invoke({ ...call, command: 'DEL' }).status, 0);
  const both = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: createNetns(t, 'old').path,
    netconf: { ...netconf, etcd_endpoints: etcd.endpoints, etcd_authority: '127.0.0.1:1' },
  });
  t.is(both.status, 0, 'etcd_endpoints wins');
  const bad = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: createNetns(t, 'old').path,
    netconf: { ...netconf, etcd_endpoints: 'etcd-1:2379' },
  });
  t.is(bad.json.code, 7);
  t.is(bad.json.msg, 'netconf field "etcd_endpoints" must be http:// or https:// URLs, comma-separated, got "etcd-1:2379"');
  t.is(ctl(etcd, 'ipam', 'check', '--grace-period', '0').status, 0);
});
