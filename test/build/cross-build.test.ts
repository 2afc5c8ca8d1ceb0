// `npm run build:addon -- --target <the other architecture>` yields an N-API module for that
// architecture (arm64 when built on x86-64, x86-64 when built on arm64), and that module works:
// Node's official build for that architecture, run through qemu-user, loads it and wires a pod in
// a real namespace that the host then reaches.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { arch } from 'node:os';

import test from 'ava';

import { createNetns, hostIfname, link, ping, routes, uniqueV4, uniqueV6 } from '../helpers/kernel.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const FOREIGN = {
  x64: { arch: 'arm64', elfMachine: 183 /* EM_AARCH64 */ },
  arm64: { arch: 'x64', elfMachine: 62 /* EM_X86_64 */ },
}[arch() as 'x64' | 'arm64'];
const FIXTURE = `${ROOT}test/fixtures/foreign-pod.ts`;

test.serial('the addon cross-builds for the other architecture', (t) => {
  // npm test's pretest ran the cold build; here it is a no-op unless the sources changed since.
  t.timeout(20 * 60_000, 'a cross-build of changed sources compiles the workspace crates');
  t.truthy(FOREIGN, `cross-builds are set up from x64 and arm64, not ${arch()}`);
  const addon = execFileSync('sh', ['scripts/cross-build.sh'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  t.is(addon, `${ROOT}native/netplug-dataplane.linux-${FOREIGN.arch}-gnu.node`);
  const elf = readFileSync(addon);
  t.deepEqual([...elf.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], 'an ELF file');
  t.is(elf[4], 2, '64-bit');
  t.is(elf.readUInt16LE(16), 3, 'a shared object');
  t.is(elf.readUInt16LE(18), FOREIGN.elfMachine, `for ${FOREIGN.arch}`);
});

test.serial('Node for the other architecture under qemu-user loads its addon and wires a pod', (t) => {
  t.timeout(10 * 60_000, 'the first run installs qemu and fetches the foreign Node');
  const foreignNode = execFileSync('sh', ['scripts/foreign-node.sh'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const qemu = execFileSync('sh', ['scripts/foreign-node.sh', '--qemu'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const run = (...args: string[]) => JSON.parse(execFileSync(qemu, [foreignNode, FIXTURE, ...args], { encoding: 'utf8' }));
  const netns = createNetns(t, 'foreign');
  const [host, v4, v6] = [hostIfname('npq'), uniqueV4(), uniqueV6()];

  const made = run('setup', netns.path, host, v4, v6);
  t.is(made.arch, FOREIGN.arch);
  t.is(made.interfaces.host.mac, 'ee:ee:ee:ee:ee:ee');
  t.deepEqual(made.differences, []);
  t.like(link(host), { mtu: 1400, num_tx_queues: 2, num_rx_queues: 2, operstate: 'UP' });
  t.true(routes(4, netns).includes('default via 169.254.1.1 dev eth0'));
  t.true(ping(v4) && ping(v6), `the host reaches the pod wired by the ${FOREIGN.arch} addon`);

  t.deepEqual(run('teardown', netns.path), { arch: FOREIGN.arch, result: 'removed' });
  t.is(link(host), undefined);
});
