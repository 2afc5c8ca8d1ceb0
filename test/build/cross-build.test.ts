// `npm run build:addon -- --target aarch64-unknown-linux-gnu` on this x86-64 machine yields an
// arm64 N-API module, and that module works: Node's official arm64 build, run through qemu-user,
// loads it and wires a pod in a real namespace that the host then reaches.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { arch } from 'node:os';

import test from 'ava';

import { createNetns, hostIfname, link, ping, routes, uniqueV4, uniqueV6 } from '../helpers/kernel.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const ADDON = `${ROOT}native/netplug-dataplane.linux-arm64-gnu.node`;
const FIXTURE = `${ROOT}test/fixtures/arm64-pod.ts`;
const EM_AARCH64 = 183;

test.serial('the addon cross-builds for aarch64 Linux', (t) => {
  t.timeout(20 * 60_000, 'the first cross-build installs Debian packages and compiles every crate');
  t.is(arch(), 'x64', 'this test cross-builds from x86-64');
  execFileSync('sh', ['scripts/build-addon.sh', '--target', 'aarch64-unknown-linux-gnu'], { cwd: ROOT, stdio: 'ignore' });
  const elf = readFileSync(ADDON);
  t.deepEqual([...elf.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], 'an ELF file');
  t.is(elf[4], 2, '64-bit');
  t.is(elf.readUInt16LE(16), 3, 'a shared object');
  t.is(elf.readUInt16LE(18), EM_AARCH64, 'for aarch64');
});

test.serial('arm64 Node under qemu-user loads the arm64 addon and wires a pod', (t) => {
  t.timeout(10 * 60_000, 'the first run installs qemu and fetches the arm64 Node');
  const arm64Node = execFileSync('sh', ['scripts/arm64-node.sh'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const qemu = (...args: string[]) => JSON.parse(execFileSync('qemu-aarch64-static', [arm64Node, FIXTURE, ...args], { encoding: 'utf8' }));
  const netns = createNetns(t, 'arm64');
  const [host, v4, v6] = [hostIfname('npq'), uniqueV4(), uniqueV6()];

  const made = qemu('setup', netns.path, host, v4, v6);
  t.is(made.arch, 'arm64');
  t.is(made.interfaces.host.mac, 'ee:ee:ee:ee:ee:ee');
  t.deepEqual(made.differences, []);
  t.like(link(host), { mtu: 1400, num_tx_queues: 2, num_rx_queues: 2, operstate: 'UP' });
  t.true(routes(4, netns).includes('default via 169.254.1.1 dev eth0'));
  t.true(ping(v4) && ping(v6), 'the host reaches the pod wired by the arm64 addon');

  t.deepEqual(qemu('teardown', netns.path), { arch: 'arm64', result: 'removed' });
  t.is(link(host), undefined);
});
