// The findings of black-box fuzzing, each as a named case through the built
// executable on a real etcd and real namespaces: what a runtime sends, and what must come back.
// Every run is contained (pids cgroup, time limit), so a regression fails its case, not the machine.
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { CNI_PATH, requireBuilt, tempDir } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { ctl, ctlOk, ipamNetconf, totalAllocated } from '../helpers/ipam.ts';
import { containerId, createNetns, link, requireRoot, uniqueSubnet4 } from '../helpers/kernel.ts';
import { derivedHostName, hostLinkExists, linksIn } from './lib/attachment.ts';
import { codeOf, judgeRun, runBounded, STDERR_CAP } from './lib/exec.ts';

test.before(() => {
  requireRoot();
  requireBuilt();
});

async function etcdWithPool(t: ExecutionContext): Promise<EtcdServer> {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', uniqueSubnet4());
  return etcd;
}

const runtimeEnv = (command: string, cid: string, netns: string, extra: Record<string, string> = {}) => ({
  PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
  CNI_COMMAND: command,
  CNI_CONTAINERID: cid,
  CNI_NETNS: netns,
  CNI_IFNAME: 'eth0',
  CNI_PATH,
  ...extra,
});

const input = (netconf: unknown) => Buffer.from(JSON.stringify(netconf));

/** Removes a host link at teardown if a run left it (a finding reported by the assertions). */
function removeHostLinkAtTeardown(t: ExecutionContext, name: string | undefined): void {
  if (name) t.teardown(() => void (hostLinkExists(name) && spawnSync('ip', ['link', 'del', name])));
}

function datastoreClean(t: ExecutionContext, etcd: EtcdServer): void {
  t.is(totalAllocated(t, etcd), 0, 'nothing allocated');
  const check = ctl(etcd, 'ipam', 'check', '--grace-period', '0');
  t.is(check.status, 0, `ipam check: ${check.stdout}`);
}

test('ipam.type "netplug" (netplug delegating to itself) is refused with error 7, and no second netplug runs', async (t) => {
  const etcd = await etcdWithPool(t);
  const netns = createNetns(t, 'self');
  const conf = { ...ipamNetconf(etcd), ipam: { type: 'netplug' } };
  // The cgroup caps the tasks at 128: a runaway is contained and shows as its peak.
  const run = await runBounded(runtimeEnv('ADD', containerId(), netns.path), input(conf), { timeoutMs: 20_000 });
  t.is(judgeRun(run, [7], { mustFail: true, maxTasks: 24 }), undefined, `ADD: ${run.stdout}`);
});

test('a 15-character FELIX_INTERFACEPREFIX (no room for the hash) is refused before two pods can share a host interface', async (t) => {
  const etcd = await etcdWithPool(t);
  const prefix = 'abcdefghijklmno';
  removeHostLinkAtTeardown(t, prefix);
  const pods = [0, 1].map(() => ({ cid: containerId(), netns: createNetns(t, 'pfx') }));
  const adds = [];
  for (const pod of pods)
    adds.push(
      await runBounded(
        runtimeEnv('ADD', pod.cid, pod.netns.path, { FELIX_INTERFACEPREFIX: prefix }),
        input(ipamNetconf(etcd, { name: 'prefix' })),
      ),
    );
  t.teardown(async () => {
    for (const pod of pods)
      await runBounded(
        runtimeEnv('DEL', pod.cid, pod.netns.path, { FELIX_INTERFACEPREFIX: prefix }),
        input(ipamNetconf(etcd, { name: 'prefix' })),
      );
  });
  for (const [i, add] of adds.entries()) t.is(judgeRun(add, [4, 7], { mustFail: true }), undefined, `ADD of pod ${i}: ${add.stdout}`);
  t.true(
    pods.every((pod) => linksIn(pod.netns.name).every((l) => l === 'lo')),
    'no pod was wired',
  );
});

test('a FELIX_INTERFACEPREFIX with "/" is refused as configuration (4 or 7), not a kernel failure', async (t) => {
  const etcd = await etcdWithPool(t);
  const netns = createNetns(t, 'pfx');
  const run = await runBounded(runtimeEnv('ADD', containerId(), netns.path, { FELIX_INTERFACEPREFIX: 'a/b' }), input(ipamNetconf(etcd)));
  t.is(judgeRun(run, [4, 7], { mustFail: true }), undefined, run.stdout);
  datastoreClean(t, etcd);
});

for (const node of ['a/b', '../../x', 'x\uD800', 'Node_A', '-a']) {
  test(`nodename ${JSON.stringify(node)} (not a DNS-1123 subdomain) is refused with error 7, and nothing is written`, async (t) => {
    const etcd = await etcdWithPool(t);
    const netns = createNetns(t, 'node');
    const cid = containerId();
    const conf = input(ipamNetconf(etcd, { node }));
    const add = await runBounded(runtimeEnv('ADD', cid, netns.path), conf);
    await runBounded(runtimeEnv('DEL', cid, netns.path), conf);
    t.is(judgeRun(add, [7], { mustFail: true }), undefined, add.stdout);
    datastoreClean(t, etcd);
  });
}

test('a FIFO as log_file_path neither blocks ADD nor DEL', async (t) => {
  const etcd = await etcdWithPool(t);
  const fifo = join(tempDir(t, 'fifo'), 'cni.log');
  execFileSync('mkfifo', [fifo]);
  const netns = createNetns(t, 'fifo');
  const cid = containerId();
  const conf = input(ipamNetconf(etcd, { extra: { log_file_path: fifo } }));
  removeHostLinkAtTeardown(t, derivedHostName(runtimeEnv('ADD', cid, netns.path)));
  const add = await runBounded(runtimeEnv('ADD', cid, netns.path), conf, { timeoutMs: 20_000 });
  const del = await runBounded(runtimeEnv('DEL', cid, netns.path), conf, { timeoutMs: 20_000 });
  t.is(judgeRun(add, [7]), undefined, `ADD: ${add.stdout}`);
  t.is(judgeRun(del, codeOf(add) === 7 ? [7] : []), undefined, `DEL: ${del.stdout}`);
  datastoreClean(t, etcd);
});

for (const mtu of [68, 576, 1279]) {
  test(`an IPv4-only pod with mtu ${mtu} is added (no IPv6 setting is needed for it) and deleted`, async (t) => {
    const etcd = await etcdWithPool(t);
    const netns = createNetns(t, 'mtu');
    const cid = containerId();
    const conf = input(ipamNetconf(etcd, { extra: { mtu } }));
    removeHostLinkAtTeardown(t, derivedHostName(runtimeEnv('ADD', cid, netns.path)));
    const add = await runBounded(runtimeEnv('ADD', cid, netns.path), conf);
    t.is(judgeRun(add, [], {}), undefined, `ADD: ${add.stdout}`);
    if (add.status === 0) t.is(link('eth0', netns)?.mtu, mtu);
    const del = await runBounded(runtimeEnv('DEL', cid, netns.path), conf);
    t.is(judgeRun(del, []), undefined, `DEL: ${del.stdout}`);
    datastoreClean(t, etcd);
  });
}

test('a netconf field nested 100,000 deep is error 7 naming the field, not 999', async (t) => {
  const netns = createNetns(t, 'deep');
  const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
  const text = `{"cniVersion":"1.1.0","name":"deep","type":"netplug","ipam":{"type":"netplug-ipam"},"mtu":${deep}}`;
  const run = await runBounded(runtimeEnv('ADD', containerId(), netns.path), text);
  t.is(judgeRun(run, [7], { mustFail: true }), undefined, run.stdout.slice(0, 500));
  t.regex(run.stdout, /mtu/);
});

test('"etcd_endpoints": ",,," is error 7 naming the field, not 999', async (t) => {
  const netns = createNetns(t, 'ep');
  const conf = { cniVersion: '1.1.0', name: 'ep', type: 'netplug', etcd_endpoints: ',,,', ipam: { type: 'netplug-ipam' } };
  const run = await runBounded(runtimeEnv('ADD', containerId(), netns.path), input(conf));
  t.is(judgeRun(run, [7], { mustFail: true }), undefined, run.stdout);
  t.regex(run.stdout, /etcd_endpoints/);
});

for (const [label, conf] of [
  ['cniVersion of 1 MiB', { cniVersion: 'x'.repeat(1 << 20), name: 'n', type: 'netplug', ipam: { type: 'netplug-ipam' } }],
  ['name of 1 MiB', { cniVersion: '1.1.0', name: '-'.repeat(1 << 20), type: 'netplug', ipam: { type: 'netplug-ipam' } }],
  ['ipam.type of 1 MiB', { cniVersion: '1.1.0', name: 'n', type: 'netplug', ipam: { type: 'y'.repeat(1 << 20) } }],
] as const) {
  test(`a ${label} is refused with a bounded message on stdout and stderr, on ADD and DEL`, async (t) => {
    const netns = createNetns(t, 'huge');
    for (const command of ['ADD', 'DEL']) {
      const run = await runBounded(runtimeEnv(command, containerId(), netns.path), input(conf));
      t.is(judgeRun(run, [1, 7], { mustFail: true }), undefined, `${command}: ${run.stdout.slice(0, 300)}`);
      t.true(
        run.stdoutBytes < 16 * 1024 && run.stderrBytes < STDERR_CAP,
        `${command}: ${run.stdoutBytes} bytes on stdout, ${run.stderrBytes} on stderr`,
      );
    }
  });
}

test('CNI_ARGS and CNI_CONTAINERID of 100 KiB (near the limit for one variable) are refused with error 4 and a bounded message', async (t) => {
  const netns = createNetns(t, 'huge');
  for (const env of [
    runtimeEnv('ADD', containerId(), netns.path, { CNI_ARGS: `K=${'v'.repeat(100_000)}` }),
    runtimeEnv('ADD', `-${'c'.repeat(100_000)}`, netns.path),
  ]) {
    const run = await runBounded(env, '{}');
    t.is(judgeRun(run, [4], { mustFail: true }), undefined, run.stdout.slice(0, 300));
  }
});

test('after an ADD with CNI_IFNAME=lo is refused, the DEL of that attachment succeeds', async (t) => {
  const etcd = await etcdWithPool(t);
  const netns = createNetns(t, 'lo');
  const cid = containerId();
  const conf = input(ipamNetconf(etcd));
  const add = await runBounded(runtimeEnv('ADD', cid, netns.path, { CNI_IFNAME: 'lo' }), conf);
  // Refused as a bad name (4, 7) or as an interface that exists already (101): either way, refused.
  t.is(judgeRun(add, [4, 7, 101], { mustFail: true }), undefined, `ADD: ${add.stdout}`);
  const del = await runBounded(runtimeEnv('DEL', cid, netns.path, { CNI_IFNAME: 'lo' }), conf);
  t.is(judgeRun(del, []), undefined, `DEL: ${del.stdout}`);
  t.deepEqual(linksIn(netns.name), ['lo'], 'lo is still there');
  datastoreClean(t, etcd);
});

test("a DEL for another container ID with a live pod's CNI_NETNS leaves that pod's eth0 and address alone", async (t) => {
  const etcd = await etcdWithPool(t);
  const netns = createNetns(t, 'other');
  const [owner, stranger] = [containerId(), containerId()];
  const conf = input(ipamNetconf(etcd));
  removeHostLinkAtTeardown(t, derivedHostName(runtimeEnv('ADD', owner, netns.path)));
  const add = await runBounded(runtimeEnv('ADD', owner, netns.path), conf);
  t.is(judgeRun(add, []), undefined, `ADD: ${add.stdout}`);
  const del = await runBounded(runtimeEnv('DEL', stranger, netns.path), conf);
  t.is(judgeRun(del, []), undefined, `stranger's DEL: ${del.stdout}`);
  t.not(link('eth0', netns), undefined, "the owner's eth0 is still there");
  t.true(hostLinkExists(derivedHostName(runtimeEnv('ADD', owner, netns.path)) ?? ''), "and the owner's host veth");
  t.is(totalAllocated(t, etcd), 1, "and the owner's address");
  const ownDel = await runBounded(runtimeEnv('DEL', owner, netns.path), conf);
  t.is(judgeRun(ownDel, []), undefined, `owner's DEL: ${ownDel.stdout}`);
  datastoreClean(t, etcd);
});

test('a missing IPAM plugin is error 7 for ADD as for DEL, also while etcd is unreachable (the datastore lock is read after it)', async (t) => {
  const netns = createNetns(t, 'noipam');
  const conf = {
    cniVersion: '1.1.0',
    name: 'noipam',
    type: 'netplug',
    nodename: 'fuzz-node',
    etcd_endpoints: 'http://127.0.0.1:1',
    ipam: { type: 'Infinity' },
    log_file_path: join(tempDir(t, 'noipam'), 'cni.log'),
  };
  const cid = containerId();
  for (const command of ['ADD', 'DEL']) {
    const run = await runBounded(runtimeEnv(command, cid, netns.path), input(conf), { timeoutMs: 20_000 });
    t.is(codeOf(run), 7, `${command}: ${run.stdout}`);
    t.regex(run.stdout, /names plugin \\"Infinity\\", which is not in CNI_PATH/);
  }
});
