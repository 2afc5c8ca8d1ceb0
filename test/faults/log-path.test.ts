// A log_file_path the plugin cannot write (in a read-only directory; under a regular file): the
// pod's networking does not depend on its log. ADD succeeds (or refuses the setting with 7, naming
// it) without hanging or crashing, DEL succeeds, and nothing is left.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { requireBuilt, tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { ctl, ctlOk, totalAllocated } from '../helpers/ipam.ts';
import { requireRoot, uniqueSubnet4 } from '../helpers/kernel.ts';
import { codeOf, makePods, podLeftovers, run } from '../helpers/runtime.ts';
import { judgeRun } from '../fuzz/lib/exec.ts';

/** A directory even root cannot write: a read-only bind mount of itself, unmounted at teardown. */
function readOnlyDir(t: ExecutionContext): string {
  const dir = join(tempDir(t, 'rolog'), 'logs');
  mkdirSync(dir);
  execFileSync('mount', ['--bind', dir, dir]);
  t.teardown(() => void spawnSync('umount', [dir]));
  execFileSync('mount', ['-o', 'remount,ro,bind', dir]);
  return dir;
}

function underAFile(t: ExecutionContext): string {
  const file = join(tempDir(t, 'filelog'), 'not-a-dir');
  writeFileSync(file, 'x');
  return join(file, 'cni.log');
}

for (const [label, logPath] of [
  ['in a read-only directory', (t: ExecutionContext) => join(readOnlyDir(t), 'cni.log')],
  ['in a read-only directory, in a subdirectory to create', (t: ExecutionContext) => join(readOnlyDir(t), 'sub', 'cni.log')],
  ['under a regular file', underAFile],
] as const) {
  test(`log_file_path ${label}: ADD works or is refused with 7, DEL works, nothing is left`, async (t) => {
    requireRoot();
    requireBuilt();
    const etcd = await startEtcd(t);
    ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', uniqueSubnet4());
    const [pod] = makePods(t, etcd, 1, 'unwritable', { log_file_path: logPath(t), log_level: 'debug' });
    if (!pod) throw new Error('no pod');
    const add = await run(pod, 'ADD', { timeoutMs: 20_000 });
    t.is(judgeRun(add, [7]), undefined, `ADD: ${add.stdout}`);
    if (codeOf(add) === 7) t.regex(add.stdout, /log_file_path/, 'the refusal names the field');
    const del = await run(pod, 'DEL', { timeoutMs: 20_000 });
    t.is(judgeRun(del, []), undefined, `DEL: ${del.stdout}`);
    t.is(totalAllocated(t, etcd), 0);
    t.deepEqual(podLeftovers(pod), []);
    t.is(ctl(etcd, 'ipam', 'check', '--grace-period', '0').status, 0);
  });
}
