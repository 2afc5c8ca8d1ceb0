// install-cni and the fast path (FAST_PATH, default true): the image's shim installed as netplug
// with the one-shot plugin beside it as netplug-oneshot; with FAST_PATH=false the one-shot plugin
// itself as netplug and no netplug-oneshot; switching back and forth replaces files atomically
// (by rename: a process running the old file keeps its inode) and keeps the record exact.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { binariesToInstall } from '../../ts/install/copy-binaries.ts';
import { install, makeNode } from './helpers.ts';

const IMAGE = { netplug: 0o755, 'netplug-oneshot': 0o755, 'netplug-ipam': 0o755, portmap: 0o755 };
const record = (root: string) =>
  (JSON.parse(readFileSync(join(root, 'var/lib/netplug/cni-installed.json'), 'utf8')).files as { path: string }[]).map((f) => f.path);

test('the shim as netplug with netplug-oneshot beside it; FAST_PATH=false installs the one-shot as netplug and removes netplug-oneshot; and back', async (t) => {
  const node = makeNode(t, IMAGE);
  const image = (name: string) => readFileSync(join(node.source, name));
  const host = (name: string) => node.path(`/opt/cni/bin/${name}`);

  t.is(await install(node), 0, node.log.join('\n'));
  t.deepEqual(readFileSync(host('netplug')), image('netplug'));
  t.deepEqual(readFileSync(host('netplug-oneshot')), image('netplug-oneshot'));
  t.is(statSync(host('netplug-oneshot')).mode & 0o777, 0o755);
  t.deepEqual(record(node.root), [
    '/opt/cni/bin/netplug-oneshot',
    '/opt/cni/bin/netplug-ipam',
    '/opt/cni/bin/portmap',
    '/opt/cni/bin/netplug',
  ]);
  // The fallback is in place before the shim that runs it.
  const installed = node.log.filter((line) => / INFO installed /.test(line)).map((line) => line.split(' ').at(-1));
  t.deepEqual(installed, ['/opt/cni/bin/netplug-oneshot', '/opt/cni/bin/netplug-ipam', '/opt/cni/bin/portmap', '/opt/cni/bin/netplug']);

  const shimInode = statSync(host('netplug')).ino;
  node.log.length = 0;
  t.is(await install(node, { FAST_PATH: 'false' }), 0, node.log.join('\n'));
  t.deepEqual(readFileSync(host('netplug')), image('netplug-oneshot'));
  t.not(statSync(host('netplug')).ino, shimInode, 'replaced by rename, not rewritten in place');
  t.false(existsSync(host('netplug-oneshot')));
  t.deepEqual(record(node.root), ['/opt/cni/bin/netplug-ipam', '/opt/cni/bin/netplug', '/opt/cni/bin/portmap']);
  t.true(node.log.some((line) => line.endsWith("INFO installed /opt/cni/bin/netplug (the image's netplug-oneshot: FAST_PATH is false)")));
  t.true(node.log.some((line) => line.endsWith('INFO removed /opt/cni/bin/netplug-oneshot')));
  t.is(await install(node, { FAST_PATH: 'False' }), 0);
  t.true(node.log.at(-1)?.endsWith('0 binaries copied, 3 already up to date'), node.log.at(-1));

  t.is(await install(node, { FAST_PATH: 'true' }), 0);
  t.deepEqual(readFileSync(host('netplug')), image('netplug'));
  t.deepEqual(readFileSync(host('netplug-oneshot')), image('netplug-oneshot'));
});

test('a bad FAST_PATH is refused naming the value, before anything is written', async (t) => {
  const node = makeNode(t, IMAGE);
  t.is(await install(node, { FAST_PATH: 'yes' }), 1);
  t.regex(node.log.join('\n'), /ERROR .*FAST_PATH "yes" must be true or false/);
  t.false(existsSync(node.path('/opt/cni/bin')));
});

test('an image without netplug-oneshot ships the one-shot plugin as netplug: installed as it is either way', (t) => {
  const files = ['netplug-ipam', 'netplug', 'portmap'];
  const identity = ['netplug', 'netplug-ipam', 'portmap'].map((name) => ({ from: name, name }));
  t.deepEqual(binariesToInstall(files, true), identity);
  t.deepEqual(binariesToInstall(files, false), identity);
});
