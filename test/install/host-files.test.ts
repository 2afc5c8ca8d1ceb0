// netplug-install outside a pod, against a temporary host root (no API server: no kubeconfig is
// written): binaries copied with their modes and skipped when identical, SKIP_ and
// UPDATE_CNI_BINARIES, the conflist atomic under 100 installs racing readers, the record and the
// removal of binaries a newer version no longer ships, etcd TLS files, a bad template, --check
// (in process and through the built executable).
import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import test from 'ava';

import { sha256OfFile } from '../../ts/install/hash-file.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { ROOT } from '../helpers/cni.ts';
import { BINARIES, install, makeNode, writeSourceFile } from './helpers.ts';

const mode = (path: string) => statSync(path).mode & 0o7777;
const record = (root: string) => JSON.parse(readFileSync(join(root, 'var/lib/netplug/cni-installed.json'), 'utf8'));

test('binaries are copied with their modes, the conflist and record written; a second run copies nothing', async (t) => {
  const node = makeNode(t);
  t.is(await install(node), 0, node.log.join('\n'));
  for (const [name, sourceMode] of Object.entries(BINARIES)) {
    const target = node.path(`/opt/cni/bin/${name}`);
    t.deepEqual(readFileSync(target), readFileSync(join(node.source, name)), name);
    t.is(mode(target), sourceMode, name);
  }
  const conflistPath = node.path('/etc/cni/net.d/10-netplug.conflist');
  t.is(mode(conflistPath), 0o600);
  const conflist = JSON.parse(readFileSync(conflistPath, 'utf8'));
  t.like(conflist.plugins[0], {
    type: 'netplug',
    datastore_type: 'kubernetes',
    nodename: 'node-a',
    kubernetes: { kubeconfig: '/etc/cni/net.d/netplug-kubeconfig' },
  });
  t.false(existsSync(node.path('/etc/cni/net.d/netplug-kubeconfig')), 'no kubeconfig outside a pod');
  t.true(node.log.some((line) => / INFO not running as a pod/.test(line)));
  const identity = (name: string) => {
    const stat = statSync(node.path(`/opt/cni/bin/${name}`));
    return `${stat.ino}:${stat.size}:${stat.ctimeMs}`;
  };
  t.deepEqual(record(node.root), {
    version: NETPLUG_VERSION,
    binDir: '/opt/cni/bin',
    confDir: '/etc/cni/net.d',
    files: await Promise.all(
      Object.keys(BINARIES)
        .sort()
        .map(async (name) => ({
          path: `/opt/cni/bin/${name}`,
          sha256: await sha256OfFile(join(node.source, name)),
          identity: identity(name),
        })),
    ),
  });

  const inodes = () =>
    Object.fromEntries(readdirSync(node.path('/opt/cni/bin')).map((name) => [name, statSync(node.path(`/opt/cni/bin/${name}`)).ino]));
  const conflistInode = statSync(conflistPath).ino;
  const before = inodes();
  // A mode changed on the host is put back without a copy.
  chmodSync(node.path('/opt/cni/bin/portmap'), 0o700);
  node.log.length = 0;
  t.is(await install(node), 0, node.log.join('\n'));
  t.deepEqual(inodes(), before, 'no binary was replaced');
  t.is(statSync(conflistPath).ino, conflistInode, 'the unchanged conflist was not rewritten');
  t.is(mode(node.path('/opt/cni/bin/portmap')), 0o755);
  t.true(
    node.log.some((line) => line.endsWith('INFO netplug CNI installed: 0 binaries copied, 4 already up to date')),
    node.log.join('\n'),
  );
  t.deepEqual(readdirSync(node.path('/opt/cni/bin')).sort(), Object.keys(BINARIES).sort(), 'no temp file left behind');

  // A host binary written over in place (same inode and size, other content) is no longer what the
  // record says: its change time tells, and the next run puts the image's back.
  const portmap = node.path('/opt/cni/bin/portmap');
  writeFileSync(portmap, Buffer.alloc(statSync(portmap).size, 0x58));
  t.is(statSync(portmap).ino, before['portmap'] as number);
  node.log.length = 0;
  t.is(await install(node), 0, node.log.join('\n'));
  t.deepEqual(readFileSync(portmap), readFileSync(join(node.source, 'portmap')));
  t.true(
    node.log.some((line) => line.endsWith('INFO netplug CNI installed: 1 binaries copied, 3 already up to date')),
    node.log.join('\n'),
  );

  // A changed binary is replaced by a new file (rename), not rewritten in place.
  writeSourceFile(node.source, 'netplug', 0o755);
  t.is(await install(node), 0);
  t.not(statSync(node.path('/opt/cni/bin/netplug')).ino, before['netplug']);
  t.deepEqual(readFileSync(node.path('/opt/cni/bin/netplug')), readFileSync(join(node.source, 'netplug')));
});

test('SKIP_CNI_BINARIES leaves a binary out; UPDATE_CNI_BINARIES=false keeps an existing one', async (t) => {
  const node = makeNode(t);
  t.is(await install(node, { SKIP_CNI_BINARIES: 'portmap, netplug-ipam' }), 0);
  t.false(existsSync(node.path('/opt/cni/bin/portmap')));
  t.false(existsSync(node.path('/opt/cni/bin/netplug-ipam')));
  t.deepEqual(
    record(node.root).files.map((file: { path: string }) => file.path),
    ['/opt/cni/bin/netplug', '/opt/cni/bin/netplug-dataplane.linux-x64-gnu.node'],
  );
  const installed = readFileSync(node.path('/opt/cni/bin/netplug'));
  writeSourceFile(node.source, 'netplug', 0o755);
  t.is(await install(node, { UPDATE_CNI_BINARIES: 'false' }), 0);
  t.deepEqual(readFileSync(node.path('/opt/cni/bin/netplug')), installed);
  t.true(existsSync(node.path('/opt/cni/bin/portmap')), 'a binary not there yet is installed');
});

test('the conflist is replaced atomically: 100 installs racing readers give no torn read and no stray conf file', async (t) => {
  const node = makeNode(t, { netplug: 0o755 });
  const conflist = node.path('/etc/cni/net.d/10-netplug.conflist');
  const template = (n: number) =>
    JSON.stringify({
      name: 'k8s-pod-network',
      cniVersion: '0.3.1',
      plugins: [{ type: 'netplug', nodename: '__KUBERNETES_NODE_NAME__', install: n, padding: 'x'.repeat(256 * 1024 + n) }],
    });
  t.is(await install(node, { CNI_NETWORK_CONFIG: template(0) }), 0);
  // Readers in other processes, as a runtime reads the conf dir: parse every read, and list the dir
  // for files libcni would load (.conf, .conflist, .json) other than ours.
  const stop = join(node.dir, 'stop');
  const reader = `
import json, os, sys
path, stop = sys.argv[1], sys.argv[2]
reads = torn = stray = 0
while not os.path.exists(stop):
    with open(path) as f:
        text = f.read()
    reads += 1
    try:
        json.loads(text)
    except ValueError:
        torn += 1
    for name in os.listdir(os.path.dirname(path)):
        if name.endswith(('.conf', '.conflist', '.json')) and name != os.path.basename(path):
            stray += 1
print(json.dumps({"reads": reads, "torn": torn, "stray": stray}))
`;
  const readers = [0, 1].map(() => {
    const child = spawn('python3', ['-c', reader, conflist, stop], { stdio: ['ignore', 'pipe', 'inherit'] });
    t.teardown(() => child.kill('SIGKILL'));
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    return new Promise<{ reads: number; torn: number; stray: number }>((resolve) => child.on('close', () => resolve(JSON.parse(out))));
  });
  // Four installers at a time, each with a different template, so every install rewrites the file.
  for (let n = 1; n <= 100; n += 4) {
    const codes = await Promise.all([0, 1, 2, 3].map((i) => install(node, { CNI_NETWORK_CONFIG: template(n + i) })));
    t.deepEqual(codes, [0, 0, 0, 0]);
  }
  writeFileSync(stop, '');
  const results = await Promise.all(readers);
  for (const result of results) {
    t.true(result.reads > 0);
    t.is(result.torn, 0, 'a reader saw a half-written conflist');
    t.is(result.stray, 0, 'a reader saw a temp file libcni would load');
  }
  t.deepEqual(readdirSync(node.path('/etc/cni/net.d')), ['10-netplug.conflist']);
});

test('a binary the previous record lists and this version no longer ships is removed; others are left', async (t) => {
  const node = makeNode(t, { netplug: 0o755, tuning: 0o755, loopback: 0o755 });
  t.is(await install(node), 0);
  // Not netplug's: never in the record.
  writeFileSync(node.path('/opt/cni/bin/bridge'), 'another plugin');
  // Replaced by someone else since: the record's hash no longer matches.
  writeFileSync(node.path('/opt/cni/bin/loopback'), 'replaced by another installer');
  for (const name of ['tuning', 'loopback']) rmSync(join(node.source, name));
  t.is(await install(node), 0, node.log.join('\n'));
  t.false(existsSync(node.path('/opt/cni/bin/tuning')));
  t.true(existsSync(node.path('/opt/cni/bin/netplug')));
  t.is(readFileSync(node.path('/opt/cni/bin/bridge'), 'utf8'), 'another plugin');
  t.is(readFileSync(node.path('/opt/cni/bin/loopback'), 'utf8'), 'replaced by another installer');
  t.true(node.log.some((line) => line.endsWith('INFO removed /opt/cni/bin/tuning')));
  t.true(node.log.some((line) => line.endsWith('WARNING leaving /opt/cni/bin/loopback: its content changed since netplug installed it')));
  t.deepEqual(
    record(node.root).files.map((file: { path: string }) => file.path),
    ['/opt/cni/bin/netplug'],
  );
});

test('etcd TLS files are copied 0600 and named in the conflist by their host paths; removed when the Secret has none', async (t) => {
  const node = makeNode(t, { netplug: 0o755 });
  const secrets = join(node.dir, 'netplug-secrets');
  mkdirSync(secrets);
  for (const name of ['etcd-ca', 'etcd-cert', 'etcd-key']) writeFileSync(join(secrets, name), `${name} PEM`);
  const env = {
    TLS_ASSETS_DIR: secrets,
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: 'https://10.0.0.1:2379',
    CNI_NET_DIR: '/etc/kubernetes/net.d',
    CNI_MTU: '1440',
  };
  t.is(await install(node, env), 0, node.log.join('\n'));
  for (const name of ['etcd-ca', 'etcd-cert', 'etcd-key']) {
    const copied = node.path(`/etc/cni/net.d/netplug-tls/${name}`);
    t.is(readFileSync(copied, 'utf8'), `${name} PEM`);
    t.is(mode(copied), 0o600);
  }
  const [netplug] = JSON.parse(readFileSync(node.path('/etc/cni/net.d/10-netplug.conflist'), 'utf8')).plugins;
  t.like(netplug, {
    datastore_type: 'etcdv3',
    etcd_endpoints: 'https://10.0.0.1:2379',
    etcd_ca_cert_file: '/etc/kubernetes/net.d/netplug-tls/etcd-ca',
    etcd_cert_file: '/etc/kubernetes/net.d/netplug-tls/etcd-cert',
    etcd_key_file: '/etc/kubernetes/net.d/netplug-tls/etcd-key',
    mtu: 1440,
    kubernetes: { kubeconfig: '/etc/kubernetes/net.d/netplug-kubeconfig' },
  });
  t.is(await install(node, { ...env, TLS_ASSETS_DIR: join(node.dir, 'none') }), 0);
  t.false(existsSync(node.path('/etc/cni/net.d/netplug-tls')));
  const [without] = JSON.parse(readFileSync(node.path('/etc/cni/net.d/10-netplug.conflist'), 'utf8')).plugins;
  t.false('etcd_key_file' in without, 'no empty TLS fields');
});

test('a bad template is refused with a message naming its source, and nothing is written', async (t) => {
  const node = makeNode(t);
  const file = join(node.dir, 'template.json');
  writeFileSync(file, '{"name": "k8s-pod-network", "plugins": [{"type": "netplug", "mtu": __CNI_MTU__}');
  t.is(await install(node, { CNI_NETWORK_CONFIG_FILE: file, CNI_NETWORK_CONFIG: '{"type":"ignored: the file wins"}', CNI_MTU: '1500' }), 1);
  t.is(node.log.length, 1, node.log.join('\n'));
  t.regex(
    node.log[0] ?? '',
    new RegExp(`^\\S+Z ERROR install failed: the CNI network config template from CNI_NETWORK_CONFIG_FILE ${file} is not valid JSON`),
  );
  t.deepEqual(readdirSync(node.root), [], 'nothing written under the host root');
  t.is(await install(node, { CNI_NETWORK_CONFIG_FILE: join(node.dir, 'missing.json') }), 1);
  t.regex(node.log.at(-1) ?? '', /cannot read the CNI network config template CNI_NETWORK_CONFIG_FILE .*missing.json: ENOENT/);
  t.deepEqual(readdirSync(node.root), []);
});

test('--check: ready only once this version is recorded and the conflist exists (in process and as the built executable)', async (t) => {
  const node = makeNode(t, { netplug: 0o755 });
  const check = () => install(node, {}, undefined, ['--check']);
  t.is(await check(), 1);
  t.regex(node.log.at(-1) ?? '', /INFO not ready: no install record at/);
  t.is(await install(node), 0);
  t.is(await check(), 0);
  const built = join(ROOT, 'dist/bin/netplug-install');
  const run = (...args: string[]) =>
    promisify(execFile)(built, args, { env: { PATH: process.env.PATH, ...node.env } }).then(
      () => 0,
      (err: { code: number }) => err.code,
    );
  t.is(await run('--check'), 0);
  // The probe runs every few seconds on every node: from the plugin's bundle, with its code cache, not the agents'.
  const { stderr } = await promisify(execFile)(built, ['--check'], {
    env: { PATH: process.env.PATH, ...node.env, NETPLUG_REPORT_CODE_CACHE: '1' },
  });
  t.regex(stderr, /^code cache accepted$/m);
  rmSync(node.path('/etc/cni/net.d/10-netplug.conflist'));
  t.is(await check(), 1);
  t.is(await run('--check'), 1);
  t.is(await run(), 0, 'the built executable installs');
  t.is(await run('--check'), 0);
  writeFileSync(node.path('/var/lib/netplug/cni-installed.json'), JSON.stringify({ ...record(node.root), version: 'v3.30.9' }));
  t.is(await check(), 1);
  t.regex(node.log.at(-1) ?? '', /not ready: the install record says v3.30.9, not v3\.31\.\d+/);
  t.is(await install(node, {}, undefined, ['--bogus']), 2);
});

test('temp files a crashed install left are removed; a recent one (a write in progress elsewhere) is not', async (t) => {
  const node = makeNode(t, { netplug: 0o755 });
  t.is(await install(node), 0);
  const confDir = node.path('/etc/cni/net.d');
  const crashed = join(confDir, '.10-netplug.conflist.4000000.7.tmp');
  const recent = join(confDir, '.10-netplug.conflist.4000001.0.tmp');
  const crashedBinary = node.path('/opt/cni/bin/.netplug.4000000.3.tmp');
  for (const path of [crashed, recent, crashedBinary]) writeFileSync(path, 'partial');
  const hourAgo = new Date(Date.now() - 3_600_000);
  for (const path of [crashed, crashedBinary]) utimesSync(path, hourAgo, hourAgo);
  t.is(await install(node), 0);
  t.false(existsSync(crashed));
  t.false(existsSync(crashedBinary));
  t.true(existsSync(recent));
});
