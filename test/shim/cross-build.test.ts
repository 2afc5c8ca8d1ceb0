// scripts/cross-build.sh also builds the shim for the other architecture (arm64 on x86-64, x86-64
// on arm64), static like this machine's, and that shim works: run through qemu-user it forwards a
// call to an agent's socket and returns the answer, and without one it turns to netplug-oneshot
// beside it.
import { execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync, statSync } from 'node:fs';
import { arch } from 'node:os';
import { join } from 'node:path';

import test from 'ava';

import { readElfDynamic } from '../../scripts/lib/image-elf.ts';
import { tempDir } from '../helpers/cni.ts';
import { run, startProtocolAgent } from './protocol-agent.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const FOREIGN = {
  x64: { arch: 'arm64', elfMachine: 183 /* EM_AARCH64 */ },
  arm64: { arch: 'x64', elfMachine: 62 /* EM_X86_64 */ },
}[arch() as 'x64' | 'arm64'];

test.serial('the shim cross-builds for the other architecture, static and at most 3 MB', (t) => {
  // npm test's pretest ran the cold build; here it is a no-op unless the sources changed since.
  t.timeout(20 * 60_000, 'a cross-build of changed sources compiles the workspace crates');
  t.truthy(FOREIGN, `cross-builds are set up from x64 and arm64, not ${arch()}`);
  const shim = execFileSync('sh', ['scripts/cross-build.sh', '--shim'], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  }).trim();
  t.is(shim, `${ROOT}native/netplug.linux-${FOREIGN?.arch}-gnu`);
  const elf = readFileSync(shim);
  t.deepEqual([...elf.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], 'an ELF file');
  t.is(elf.readUInt16LE(18), FOREIGN?.elfMachine, `for ${FOREIGN?.arch}`);
  t.deepEqual(readElfDynamic(shim)?.needed ?? [], [], 'no library');
  t.is(readElfDynamic(shim)?.interpreter, undefined, 'no loader');
  t.true(statSync(shim).size <= 3_000_000, `${statSync(shim).size} bytes`);
});

test.serial('the foreign shim under qemu-user forwards to the agent, and without one turns to netplug-oneshot', async (t) => {
  t.timeout(10 * 60_000, 'the first run installs qemu');
  execFileSync('sh', ['scripts/foreign-node.sh'], { cwd: ROOT, stdio: 'ignore' });
  const qemu = execFileSync('sh', ['scripts/foreign-node.sh', '--qemu'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dir = tempDir(t, 'foreign-shim');
  const shim = join(dir, 'netplug');
  copyFileSync(`${ROOT}native/netplug.linux-${FOREIGN?.arch}-gnu`, shim);

  const agent = await startProtocolAgent(t, (request) => ({
    kind: 'serve',
    exitCode: 3,
    stdout: `served ${request.env['CNI_CONTAINERID']}`,
    stderr: 'log\n',
  }));
  const env = {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'foreign',
    NETPLUG_AGENT_SOCKET: agent.socket,
    NETPLUG_AGENT_ACCEPT_TIMEOUT_MS: '30000',
  };
  const served = await run(qemu, env, '{"cniVersion":"1.0.0"}', [shim]);
  t.deepEqual([served.status, served.stdout.toString(), served.stderr.toString()], [3, 'served foreign', 'log\n']);
  const [call] = await agent.settled();
  t.is(call?.stdin.toString(), '{"cniVersion":"1.0.0"}');
  t.true(call?.go);

  const absent = join(dir, 'absent.sock');
  const alone = await run(qemu, { ...env, NETPLUG_AGENT_SOCKET: absent }, '{"cniVersion":"1.0.0"}', [shim]);
  t.is(alone.status, 1);
  t.like(JSON.parse(alone.stdout.toString()), {
    cniVersion: '1.0.0',
    code: 999,
    msg: `internal error: cannot run ${dir}/netplug-oneshot: No such file or directory (os error 2)`,
  });
});
