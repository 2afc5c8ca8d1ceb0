// The built executables are self-contained: they run with no Node.js anywhere on the machine, and
// dispatch on the name they are run as.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { NETPLUG_VERSION } from '../../ts/version.ts';
import { CNI_PATH, DIST_CNI, hostLocalNetconf, hostVeth, NETPLUG, requireBuilt, ROOT, tempDir } from '../helpers/cni.ts';
import { containerId, createNetns, link, uniqueSubnet4 } from '../helpers/kernel.ts';

test('ADD and DEL work with every node binary on the machine masked', (t) => {
  requireBuilt();
  const netns = createNetns(t, 'nonode');
  const dataDir = tempDir(t, 'hl');
  const id = containerId();
  const conf = JSON.stringify(hostLocalNetconf({ version: '1.0.0', dataDir, subnet: uniqueSubnet4() }));
  const nodes = ['/usr/bin/node', realpathSync(join(ROOT, 'node_modules/.bin/node'))].filter(
    (path) => spawnSync('test', ['-e', path]).status === 0,
  );
  // In a private mount namespace: /dev/null over every node, then run the plugin twice.
  const script = [
    ...nodes.map((path) => `mount --bind /dev/null ${path}`),
    'if command -v node >/dev/null && node -e 0 2>/dev/null; then echo "node still runs"; exit 9; fi',
    `printf '%s' '${conf}' | CNI_COMMAND=ADD ${NETPLUG}`,
    `printf '%s' '${conf}' | CNI_COMMAND=DEL ${NETPLUG}`,
  ].join(' && ');
  const run = spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script], {
    encoding: 'utf8',
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', CNI_CONTAINERID: id, CNI_NETNS: netns.path, CNI_IFNAME: 'eth0', CNI_PATH },
  });
  t.is(run.status, 0, run.stdout + run.stderr);
  t.regex(run.stdout, /"interfaces"/, 'ADD printed its result');
  t.is(link(hostVeth(id)), undefined, 'and DEL removed the pod');
});

test('one file, seven names; every one prints the release (v3.31.N, package.json) for --version', (t) => {
  requireBuilt();
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  t.is(NETPLUG_VERSION, `v${pkg.version}`);
  t.regex(NETPLUG_VERSION, /^v3\.31\.\d+$/);
  for (const path of [
    'cni/netplug',
    'cni/netplug-ipam',
    'bin/netplugctl',
    'bin/netplug-node',
    'bin/netplug-install',
    'bin/netplug-kube-controllers',
    'bin/netplug-operator',
  ]) {
    const name = path.split('/')[1];
    t.is(execFileSync(join(ROOT, 'dist', path), ['--version'], { encoding: 'utf8' }), `${name} ${NETPLUG_VERSION}\n`);
  }
  const ipamVersion = spawnSync(join(DIST_CNI, 'netplug-ipam'), [], { env: { CNI_COMMAND: 'VERSION' }, encoding: 'utf8' });
  t.is(JSON.parse(ipamVersion.stdout).cniVersion, '1.1.0');
  const about = spawnSync(NETPLUG, [], { env: {}, encoding: 'utf8' });
  t.true(about.stderr.startsWith(`netplug ${NETPLUG_VERSION}: a CNI plugin`));
});
