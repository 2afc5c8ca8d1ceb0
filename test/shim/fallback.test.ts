// The built shim with no agent: the one-shot plugin beside it answers, exactly as when run itself;
// and the shim as a file: small, static, finding netplug-oneshot beside its real path.
import { execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { readElfDynamic } from '../../scripts/lib/image-elf.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { DIST_CNI, NETPLUG, requireBuilt, tempDir } from '../helpers/cni.ts';
import { logWithoutTimeAndPid, run } from './protocol-agent.ts';

const ONESHOT = join(DIST_CNI, 'netplug-oneshot');

test.before(() => requireBuilt());

/** Runs the shim and the one-shot plugin on the same call and expects the same answer. */
async function sameAsOneShot(
  t: import('ava').ExecutionContext,
  env: Record<string, string>,
  stdin = '',
  args: string[] = [],
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const shim = await run(NETPLUG, env, stdin, args);
  const direct = await run(ONESHOT, env, stdin, args);
  const answer = (r: typeof shim) => ({ status: r.status, stdout: r.stdout.toString(), stderr: logWithoutTimeAndPid(r.stderr) });
  t.deepEqual(answer(shim), answer(direct));
  return answer(shim);
}

const noAgent = (t: import('ava').ExecutionContext, extra: Record<string, string>): Record<string, string> => ({
  PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
  NETPLUG_AGENT_SOCKET: join(tempDir(t, 'nosock'), 'cni.sock'),
  ...extra,
});

test('no socket: VERSION is the one-shot plugin’s answer', async (t) => {
  const version = await sameAsOneShot(t, noAgent(t, { CNI_COMMAND: 'VERSION' }), '{"cniVersion":"1.0.0"}');
  t.is(version.status, 0);
  t.is(JSON.parse(version.stdout).cniVersion, '1.1.0');
});

test('no socket: a bad netconf gets the one-shot plugin’s error, and its log line says one-shot', async (t) => {
  const env = noAgent(t, {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'c',
    CNI_NETNS: '/proc/self/ns/net',
    CNI_IFNAME: 'eth0',
    CNI_PATH: DIST_CNI,
  });
  const bad = await sameAsOneShot(t, env, JSON.stringify({ cniVersion: '1.0.0', name: 'n', type: 'netplug', mtu: 'jumbo' }));
  t.is(bad.status, 1);
  t.like(JSON.parse(bad.stdout), { cniVersion: '1.0.0', code: 7 });
  t.regex(bad.stderr, /^<time> \[ERROR\]\[<pid>\] netplug: ADD failed: .*via="one-shot"/m);
  const missing = await sameAsOneShot(t, noAgent(t, { CNI_COMMAND: 'DEL' }), '{}');
  t.is(missing.status, 1);
});

test('no socket: without a command, and with --version, the shim is the plugin, named netplug', async (t) => {
  const about = await sameAsOneShot(t, noAgent(t, {}));
  t.true(about.stderr.startsWith(`netplug ${NETPLUG_VERSION}: a CNI plugin`), about.stderr);
  const version = await sameAsOneShot(t, noAgent(t, {}), '', ['--version']);
  t.is(version.stdout, `netplug ${NETPLUG_VERSION}\n`);
});

test('a stale socket nobody listens on: the one-shot plugin answers', async (t) => {
  // What a killed agent leaves: the socket's file, bound once, with no listener.
  const stale = join(tempDir(t, 'stale'), 'cni.sock');
  execFileSync('python3', ['-c', 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])', stale]);
  t.true(statSync(stale).isSocket());
  const answer = await sameAsOneShot(t, { PATH: '/usr/bin:/bin', CNI_COMMAND: 'VERSION', NETPLUG_AGENT_SOCKET: stale });
  t.is(answer.status, 0);
});

test('without netplug-oneshot beside it the shim says so: error 999 naming the file and why the agent did not serve', async (t) => {
  const dir = tempDir(t, 'lonely');
  const lonely = join(dir, 'netplug');
  copyFileSync(NETPLUG, lonely);
  const env = noAgent(t, { CNI_COMMAND: 'ADD' });
  const shim = await run(lonely, env, '{"cniVersion":"0.3.1"}');
  t.is(shim.status, 1);
  t.deepEqual(JSON.parse(shim.stdout.toString()), {
    cniVersion: '0.3.1',
    code: 999,
    msg: `internal error: cannot run ${dir}/netplug-oneshot: No such file or directory (os error 2)`,
    details: `netplug-node did not serve the call: cannot connect to ${env['NETPLUG_AGENT_SOCKET']}: No such file or directory (os error 2)`,
  });
});

test('run through a symbolic link, the shim finds netplug-oneshot beside the file it is', async (t) => {
  const link = join(tempDir(t, 'link'), 'netplug');
  symlinkSync(NETPLUG, link);
  const shim = await run(link, noAgent(t, { CNI_COMMAND: 'VERSION' }));
  t.is(shim.status, 0);
  t.is(JSON.parse(shim.stdout.toString()).cniVersion, '1.1.0');
});

test('the shim is at most 3 MB and static: it loads no library, so it runs on any host libc', (t) => {
  const size = statSync(NETPLUG).size;
  t.true(size <= 3_000_000, `${size} bytes`);
  t.deepEqual(readElfDynamic(NETPLUG)?.needed ?? [], []);
  t.is(readElfDynamic(NETPLUG)?.interpreter, undefined);
  t.false(readFileSync(NETPLUG).equals(readFileSync(ONESHOT)));
});
