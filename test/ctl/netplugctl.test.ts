// netplugctl, the built executable, against a real etcd: pools, nodes, IPAM inspection and repair,
// datastore settings from flags, a conflist or the environment, and one-line errors that change
// nothing.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { hasStackTrace, invoke, tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { addressesOf, ctl, ctlOk, etcdDelete, etcdKeys, ipamNetconf, NETPLUGCTL, totalAllocated } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';

/** Exits non-zero with exactly one line on stderr and nothing on stdout. */
function refusedWith(t: ExecutionContext, outcome: ReturnType<typeof ctl>, exitCode: number, message: RegExp): void {
  t.is(outcome.status, exitCode, outcome.stderr);
  t.is(outcome.stdout, '');
  t.is(outcome.stderr.trimEnd().split('\n').length, 1, outcome.stderr);
  t.regex(outcome.stderr.trimEnd(), message);
  t.false(hasStackTrace(outcome.stderr));
}

test('pools: create, list, get, delete; tables for people, -o json for scripts', async (t) => {
  const etcd = await startEtcd(t);
  t.regex(
    ctlOk(t, etcd, 'pool', 'create', 'blue', '--cidr', '10.90.0.0/16').stdout,
    /pool "blue" created: 10\.90\.0\.0\/16, blocks of \/26, nodes all\(\)/,
  );
  ctlOk(
    t,
    etcd,
    'pool',
    'create',
    'v6',
    '--cidr',
    'fd90::/48',
    '--block-size',
    '120',
    '--node-selector',
    'zone == "a"',
    '--vxlan-mode',
    'Always',
    '--nat-outgoing',
  );
  const table = ctlOk(t, etcd, 'pool', 'list').stdout.split('\n');
  t.regex(table[0] ?? '', /^NAME\s+CIDR\s+BLOCK\s+NODE SELECTOR\s+IPIP\s+VXLAN\s+NAT\s+DISABLED$/);
  t.regex(table[1] ?? '', /^blue\s+10\.90\.0\.0\/16\s+\/26\s+all\(\)\s+Never\s+Never\s+false\s+false$/);
  t.deepEqual(ctlOk(t, etcd, 'pool', 'get', 'v6', '-o', 'json').json, {
    name: 'v6',
    cidr: 'fd90::/48',
    blockSize: 120,
    nodeSelector: 'zone == "a"',
    ipipMode: 'Never',
    vxlanMode: 'Always',
    natOutgoing: true,
    disabled: false,
  });
  t.deepEqual(
    ctlOk(t, etcd, 'pool', 'list', '-o', 'json').json.pools.map((p: { name: string }) => p.name),
    ['blue', 'v6'],
  );
  t.regex(ctlOk(t, etcd, 'pool', 'delete', 'v6').stdout, /pool "v6" deleted/);
  refusedWith(t, ctl(etcd, 'pool', 'get', 'v6'), 1, /^netplugctl: pool "v6" does not exist$/);
});

test('bad pool requests: one line, non-zero, nothing created', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'blue', '--cidr', '10.91.0.0/16');
  refusedWith(t, ctl(etcd, 'pool', 'create', 'blue', '--cidr', '10.92.0.0/16'), 1, /^netplugctl: pool "blue" already exists$/);
  refusedWith(t, ctl(etcd, 'pool', 'create', 'sub', '--cidr', '10.91.4.0/24'), 1, /overlaps pool "blue" \(10\.91\.0\.0\/16\)/);
  refusedWith(
    t,
    ctl(etcd, 'pool', 'create', 'x', '--cidr', '10.93.0.1/16'),
    2,
    /--cidr 10\.93\.0\.1\/16 has host bits set; did you mean 10\.93\.0\.0\/16\?/,
  );
  refusedWith(t, ctl(etcd, 'pool', 'create', 'x', '--cidr', 'ten/8'), 2, /--cidr "ten\/8" is not a CIDR/);
  refusedWith(
    t,
    ctl(etcd, 'pool', 'create', 'x', '--cidr', '10.94.0.0/16', '--block-size', '8'),
    2,
    /--block-size 8 must be a whole number from 20 to 32/,
  );
  refusedWith(t, ctl(etcd, 'pool', 'create', 'x', '--cidr', '10.94.0.0/16', '--node-selector', 'zone ==='), 2, /--node-selector: /);
  refusedWith(
    t,
    ctl(etcd, 'pool', 'create', 'x', '--cidr', '10.94.0.0/16', '--ipip-mode', 'Sometimes'),
    2,
    /--ipip-mode "Sometimes" must be one of Never, Always, CrossSubnet/,
  );
  refusedWith(t, ctl(etcd, 'pool', 'create', 'Bad_Name', '--cidr', '10.94.0.0/16'), 2, /pool name "Bad_Name" must be lower-case/);
  refusedWith(t, ctl(etcd, 'pool', 'create', 'x'), 2, /pool create needs --cidr/);
  refusedWith(t, ctl(etcd, 'pool', 'create', 'x', '--cidr', '10.94.0.0/16', '--colour', 'red'), 2, /unknown flag '--colour'/);
  refusedWith(t, ctl(etcd, 'pool', 'list', '--cidr', '10.0.0.0/8'), 2, /pool list does not take --cidr/);
  refusedWith(t, ctl(etcd, 'pool', 'frob'), 2, /unknown command "pool frob"/);
  t.deepEqual(
    ctlOk(t, etcd, 'pool', 'list', '-o', 'json').json.pools.map((p: { name: string }) => p.name),
    ['blue'],
    'nothing created',
  );
});

test('nodes carry the labels pool selectors match', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'node', 'create', 'worker-1', '--label', 'zone=east', '--label', 'example.com/rack=r7');
  t.deepEqual(ctlOk(t, etcd, 'node', 'list', '-o', 'json').json, {
    nodes: [{ name: 'worker-1', labels: { zone: 'east', 'example.com/rack': 'r7' } }],
  });
  t.regex(ctlOk(t, etcd, 'node', 'list').stdout, /worker-1\s+zone=east,example\.com\/rack=r7/);
  refusedWith(t, ctl(etcd, 'node', 'create', 'worker-1'), 1, /node "worker-1" already exists/);
  refusedWith(t, ctl(etcd, 'node', 'create', 'worker-2', '--label', 'zone'), 2, /--label "zone" must be key=value/);
  ctlOk(t, etcd, 'node', 'delete', 'worker-1');
  t.deepEqual(ctlOk(t, etcd, 'node', 'list', '-o', 'json').json, { nodes: [] });
});

test('ipam show: usage per pool and block, and who holds an address since when', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.95.0.0/16');
  const id = containerId();
  const netconf = ipamNetconf(etcd, { node: 'node-s' });
  const add = invoke({ command: 'ADD', containerId: id, netns: createNetns(t, 'show').path, netconf });
  const [address] = addressesOf(add.json);
  const json = ctlOk(t, etcd, 'ipam', 'show', '-o', 'json').json;
  t.like(json.pools[0], { name: 'default', cidr: '10.95.0.0/16', allocated: 1, free: 65535 });
  t.like(json.pools[0].blocks[0], { node: 'node-s', allocated: 1, free: 63 });
  const table = ctlOk(t, etcd, 'ipam', 'show').stdout;
  t.regex(table, /^POOL\s+CIDR\s+SIZE\s+ALLOCATED\s+FREE\ndefault\s+10\.95\.0\.0\/16\s+65536\s+1\s+65535\n/);
  t.regex(table, /BLOCK\s+POOL\s+NODE\s+ALLOCATED\s+FREE\n10\.95\.\d+\.\d+\/26\s+default\s+node-s\s+1\s+63/);
  const holder = ctlOk(t, etcd, 'ipam', 'show', '--ip', address ?? '').stdout;
  t.regex(
    holder,
    new RegExp(
      `state\\s+allocated\\nhandle\\s+${netconf.name}\\.${id}\\nnode\\s+node-s\\ninterface\\s+eth0\\nsince\\s+\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z \\(\\d+s ago\\)`,
    ),
  );
  t.like(ctlOk(t, etcd, 'ipam', 'show', '--ip', address ?? '', '-o', 'json').json, {
    ip: address,
    pool: 'default',
    allocated: true,
    node: 'node-s',
    workloadEndpointExists: true,
  });
  t.regex(ctlOk(t, etcd, 'ipam', 'show', '--ip', '10.95.250.1').stdout, /state\s+free/);
  refusedWith(t, ctl(etcd, 'ipam', 'show', '--ip', '192.0.2.1'), 1, /192\.0\.2\.1 is not in any pool/);
  refusedWith(t, ctl(etcd, 'ipam', 'show', '--ip', 'nope'), 2, /--ip "nope" is not an IP address/);
});

test('ipam check finds a leaked address; ipam release repairs it, but not an address a workload has', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.96.0.0/16');
  const netconf = ipamNetconf(etcd);
  const [kept, lost] = [containerId(), containerId()];
  const addresses = [kept, lost].map(
    (id) => addressesOf(invoke({ command: 'ADD', containerId: id, netns: createNetns(t, 'chk').path, netconf }).json)[0] ?? '',
  );
  t.regex(
    ctlOk(t, etcd, 'ipam', 'check', '--grace-period', '0').stdout,
    /checked 1 pools, 1 blocks, 2 allocated addresses, 2 handles, 2 workload endpoints\nno problems found/,
  );
  // The policy agent's view of the second pod goes, its address does not: a leak.
  const endpoint = (await etcdKeys(t, etcd, '/netplug/resources/v3/projectnet.org/workloadendpoints/')).find((k) => k.includes(lost));
  await etcdDelete(t, etcd, endpoint ?? '');
  const check = ctl(etcd, 'ipam', 'check', '--grace-period', '0', '-o', 'json');
  t.is(check.status, 1);
  t.deepEqual(
    check.json.problems.map((p: { kind: string; subject: string }) => [p.kind, p.subject]),
    [['leaked-address', addresses[1]]],
  );
  t.regex(check.json.problems[0].message, new RegExp(`netplugctl ipam release --ip ${addresses[1]?.replaceAll('.', '\\.')}`));
  t.is(ctl(etcd, 'ipam', 'check').status, 0, 'within the grace period an ADD may still be running');

  refusedWith(
    t,
    ctl(etcd, 'ipam', 'release', '--ip', addresses[0] ?? ''),
    1,
    /belongs to workload endpoint default\/.+, which still exists; DEL that workload, or add --force/,
  );
  t.regex(
    ctlOk(t, etcd, 'ipam', 'release', '--ip', addresses[1] ?? '').stdout,
    new RegExp(`released ${addresses[1]?.replaceAll('.', '\\.')} \\(handle ${netconf.name}\\.${lost}, node node-a\\)`),
  );
  refusedWith(t, ctl(etcd, 'ipam', 'release', '--ip', addresses[1] ?? ''), 1, /is not allocated; nothing to release/);
  t.is(ctl(etcd, 'ipam', 'check', '--grace-period', '0').status, 0);
  t.deepEqual(ctlOk(t, etcd, 'ipam', 'show', '-o', 'json').json.pools[0].allocated, 1);
});

test('pool delete is refused while the pool holds addresses', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.97.0.0/16');
  const call = { containerId: containerId(), netns: createNetns(t, 'del').path, netconf: ipamNetconf(etcd) };
  invoke({ ...call, command: 'ADD' });
  refusedWith(
    t,
    ctl(etcd, 'pool', 'delete', 'default'),
    1,
    /^netplugctl: pool "default" still has 1 allocated address; release them first, or add --force to delete it anyway/,
  );
  invoke({ ...call, command: 'DEL' });
  t.regex(ctlOk(t, etcd, 'pool', 'delete', 'default').stdout, /pool "default" deleted with 1 empty block/);
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/'), [], 'its blocks and affinities went with it');
});

test('pool delete --force: the pool goes, allocated addresses stay until their DEL, then nothing is left', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.87.0.0/16', '--block-size', '30');
  const calls = [0, 1, 2, 3, 4].map(() => ({
    containerId: containerId(),
    netns: createNetns(t, 'force').path,
    netconf: ipamNetconf(etcd),
  }));
  for (const call of calls) t.is(invoke({ ...call, command: 'ADD' }).status, 0);
  // Four addresses fill the first /30; the fifth opens a second block. Free the first block's: one empty, one holding.
  for (const call of calls.slice(0, 4)) t.is(invoke({ ...call, command: 'DEL' }).status, 0);
  refusedWith(t, ctl(etcd, 'pool', 'delete', 'default'), 1, /still has 1 allocated address; .*--force/);
  t.regex(
    ctlOk(t, etcd, 'pool', 'delete', 'default', '--force').stdout,
    /^pool "default" deleted with 1 empty block; 1 block still holds 1 address, released as their pods are deleted\n$/,
  );
  t.deepEqual(ctlOk(t, etcd, 'pool', 'list', '-o', 'json').json, { pools: [] });
  t.is((await etcdKeys(t, etcd, '/netplug/ipam/v2/host/')).length, 0, 'no node keeps an affinity to the blocks');
  t.is((await etcdKeys(t, etcd, '/netplug/ipam/v2/assignment/')).length, 1, 'the block with an address stays');
  t.is(invoke({ ...calls[4], command: 'DEL' }).status, 0, 'the last pod is deleted as usual');
  t.deepEqual(await etcdKeys(t, etcd, '/netplug/ipam/'), [], 'and its block goes with its last address');
  refusedWith(t, ctl(etcd, 'pool', 'delete', 'default', '--force'), 1, /^netplugctl: pool "default" does not exist$/);
});

test('pool update: disable, enable, node selector, NAT, encapsulation; a disabled pool gives no new address, even when named', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'blue', '--cidr', '10.86.0.0/16');
  const netns = () => createNetns(t, 'upd').path;
  const first = { containerId: containerId(), netns: netns(), netconf: ipamNetconf(etcd) };
  const [held] = addressesOf(invoke({ ...first, command: 'ADD' }).json);

  t.is(
    ctlOk(t, etcd, 'pool', 'update', 'blue', '--disable').stdout,
    'pool "blue" updated: disabled (no new addresses; those allocated stay)\n',
  );
  t.like(ctlOk(t, etcd, 'pool', 'get', 'blue', '-o', 'json').json, { disabled: true, cidr: '10.86.0.0/16', blockSize: 26 });
  t.is(ctlOk(t, etcd, 'pool', 'update', 'blue', '--disable').stdout, 'pool "blue" unchanged\n');
  const bySelector = invoke({ command: 'ADD', containerId: containerId(), netns: netns(), netconf: ipamNetconf(etcd) });
  t.is(bySelector.json?.code, 7, bySelector.stdout);
  t.is(bySelector.json.msg, 'no enabled IPv4 pool selects node "node-a"');
  const named = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: netns(),
    netconf: ipamNetconf(etcd, { ipam: { ipv4_pools: ['blue'] } }),
  });
  t.is(named.json?.code, 7, named.stdout);
  t.is(named.json.msg, 'netconf field "ipam.ipv4_pools": pool "blue" (10.86.0.0/16) is disabled');
  const exact = invoke({ command: 'ADD', containerId: containerId(), netns: netns(), netconf: ipamNetconf(etcd), args: 'IP=10.86.200.9' });
  t.is(exact.json?.code, 7, exact.stdout);
  t.is(exact.json.msg, 'the requested address 10.86.200.9 is in pool "blue" (10.86.0.0/16), which is disabled');
  t.is(totalAllocated(t, etcd), 1, 'the address allocated before stays');
  t.like(ctlOk(t, etcd, 'ipam', 'show', '--ip', held ?? '', '-o', 'json').json, { allocated: true, pool: 'blue' });
  t.is(invoke({ ...first, command: 'DEL' }).status, 0, 'and is released as usual');
  t.is(totalAllocated(t, etcd), 0);

  t.is(ctlOk(t, etcd, 'pool', 'update', 'blue', '--enable').stdout, 'pool "blue" updated: enabled\n');
  t.is(invoke({ command: 'ADD', containerId: containerId(), netns: netns(), netconf: ipamNetconf(etcd) }).status, 0);
  t.is(
    ctlOk(t, etcd, 'pool', 'update', 'blue', '--node-selector', 'zone == "a"', '--nat-outgoing', 'true', '--ipip-mode', 'CrossSubnet')
      .stdout,
    'pool "blue" updated: nodeSelector zone == "a", natOutgoing true, ipipMode CrossSubnet\n',
  );
  t.like(ctlOk(t, etcd, 'pool', 'get', 'blue', '-o', 'json').json, {
    nodeSelector: 'zone == "a"',
    natOutgoing: true,
    ipipMode: 'CrossSubnet',
    vxlanMode: 'Never',
    disabled: false,
  });
  refusedWith(
    t,
    ctl(etcd, 'pool', 'update', 'blue', '--vxlan-mode', 'Always'),
    1,
    /^netplugctl: pool "blue" has ipip mode CrossSubnet; --vxlan-mode Always would enable both \(add --ipip-mode Never\)$/,
  );
  ctlOk(t, etcd, 'pool', 'update', 'blue', '--vxlan-mode', 'Always', '--ipip-mode', 'Never', '--nat-outgoing=false');
  t.like(ctlOk(t, etcd, 'pool', 'get', 'blue', '-o', 'json').json, { ipipMode: 'Never', vxlanMode: 'Always', natOutgoing: false });
});

test('bad pool updates: usage errors exit 2, refusals 1, and nothing changes', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'blue', '--cidr', '10.85.0.0/16');
  ctlOk(t, etcd, 'pool', 'create', 'six', '--cidr', 'fd85::/48');
  const before = ctlOk(t, etcd, 'pool', 'list', '-o', 'json').json;
  refusedWith(t, ctl(etcd, 'pool', 'update', 'blue'), 2, /^netplugctl: pool update needs at least one of --disable, --enable, /);
  refusedWith(t, ctl(etcd, 'pool', 'update', 'blue', '--disable', '--enable'), 2, /takes --disable or --enable, not both/);
  refusedWith(t, ctl(etcd, 'pool', 'update', 'blue', '--nat-outgoing', 'yes'), 2, /--nat-outgoing "yes" must be true or false/);
  refusedWith(t, ctl(etcd, 'pool', 'update', 'blue', '--nat-outgoing'), 2, /--nat-outgoing/);
  refusedWith(
    t,
    ctl(etcd, 'pool', 'update', 'blue', '--ipip-mode', 'Sometimes'),
    2,
    /--ipip-mode "Sometimes" must be one of Never, Always, CrossSubnet/,
  );
  refusedWith(
    t,
    ctl(etcd, 'pool', 'update', 'blue', '--node-selector', 'zone ==='),
    2,
    /^netplugctl: --node-selector: selector "zone ==="/,
  );
  refusedWith(
    t,
    ctl(etcd, 'pool', 'update', 'blue', '--ipip-mode', 'Always', '--vxlan-mode', 'Always'),
    2,
    /--ipip-mode and --vxlan-mode cannot both be enabled/,
  );
  refusedWith(t, ctl(etcd, 'pool', 'update', 'blue', '--cidr', '10.0.0.0/8'), 2, /pool update does not take --cidr/);
  refusedWith(t, ctl(etcd, 'pool', 'update', '--disable'), 2, /pool update needs a NAME/);
  refusedWith(t, ctl(etcd, 'pool', 'update', 'six', '--ipip-mode', 'Always'), 1, /pool "six" is IPv6; --ipip-mode is for IPv4 pools only/);
  refusedWith(t, ctl(etcd, 'pool', 'update', 'green', '--disable'), 1, /^netplugctl: pool "green" does not exist$/);
  refusedWith(t, ctl(etcd, 'pool', 'list', '--force'), 2, /pool list does not take --force/);
  t.deepEqual(ctlOk(t, etcd, 'pool', 'list', '-o', 'json').json, before, 'nothing changed');
  // A switch before the command is not taken for a command word; a value after it is the flag's.
  ctlOk(t, etcd, '--nat-outgoing', 'pool', 'create', 'nat', '--cidr', '10.84.0.0/16');
  ctlOk(t, etcd, 'pool', 'update', 'nat', '--nat-outgoing', 'false', '--disable');
  t.like(ctlOk(t, etcd, 'pool', 'get', 'nat', '-o', 'json').json, { natOutgoing: false, disabled: true });
  t.regex(ctlOk(t, etcd, 'pool', 'update', '--help').stdout, /pool update NAME \[--disable\|--enable\]/);
});

test('the datastore from a conflist (--config) or the environment; unreachable is one line', async (t) => {
  const etcd = await startEtcd(t);
  const dir = tempDir(t, 'ctl');
  const conflist = join(dir, 'net.conflist');
  writeFileSync(
    conflist,
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'n',
      plugins: [{ type: 'netplug', etcd_endpoints: etcd.endpoints, ipam: { type: 'netplug-ipam' } }, { type: 'portmap' }],
    }),
  );
  const run = (args: string[], env: Record<string, string> = {}) =>
    spawnSync(NETPLUGCTL, args, { encoding: 'utf8', env: { PATH: '/usr/bin:/bin', ...env } });
  t.is(run(['--config', conflist, 'pool', 'create', 'from-config', '--cidr', '10.98.0.0/16']).status, 0);
  const fromEnv = run(['pool', 'list', '-o', 'json'], { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: etcd.endpoints });
  t.deepEqual(
    JSON.parse(fromEnv.stdout).pools.map((p: { name: string }) => p.name),
    ['from-config'],
  );
  const unreachable = run(['pool', 'list'], { ETCD_ENDPOINTS: 'http://127.0.0.1:1' });
  t.is(unreachable.status, 1);
  t.regex(unreachable.stderr, /^netplugctl: no etcd endpoint could be reached \(http:\/\/127\.0\.0\.1:1: Connection refused.*\)\n$/);
  t.is(run(['--config', join(dir, 'missing.json'), 'pool', 'list']).stderr, `netplugctl: --config ${join(dir, 'missing.json')}: ENOENT\n`);
  t.is(run(['version', '--client']).stdout, `Client Version:    ${NETPLUG_VERSION}\n`);
  t.is(spawnSync(NETPLUGCTL, ['--version'], { encoding: 'utf8' }).stdout, `netplugctl ${NETPLUG_VERSION}\n`);
  t.regex(run(['--help']).stdout, /^usage: netplugctl/);
  t.is(run([]).status, 2);
});
