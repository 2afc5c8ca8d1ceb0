// scripts/lib/image-elf.ts, which the image test uses to check the layer's libraries, against
// binutils' readelf on this machine's files: the same interpreter and DT_NEEDED names.
import { execFileSync } from 'node:child_process';
import { arch } from 'node:os';

import test from 'ava';

import { readElfDynamic } from '../../scripts/lib/image-elf.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const TRIPLET = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' }[arch() as 'x64' | 'arm64'];

/** readelf's answer: the interpreter and the NEEDED names. */
function readelf(path: string): { interpreter?: string; needed: string[] } {
  const segments = execFileSync('readelf', ['-lW', path], { encoding: 'utf8' });
  const dynamic = execFileSync('readelf', ['-dW', path], { encoding: 'utf8' });
  const interpreter = /Requesting program interpreter: (\S+)\]/.exec(segments)?.[1];
  const needed = [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[(\S+)\]/g)].map((match) => match[1] as string);
  return interpreter ? { interpreter, needed } : { needed };
}

for (const path of [
  `${ROOT}dist/cni/netplug-oneshot`,
  `${ROOT}dist/cni/netplug-dataplane.linux-${arch()}-gnu.node`,
  '/usr/lib/cni/portmap',
  `/lib/${TRIPLET}/libc.so.6`,
  `/lib/${TRIPLET}/libstdc++.so.6`,
]) {
  test(`reads what readelf reads of ${path}`, (t) => {
    const expected = readelf(path);
    t.true(expected.needed.length > 0);
    t.deepEqual(readElfDynamic(path), expected);
  });
}

test('a static executable names no library and no interpreter', (t) => {
  t.deepEqual(readElfDynamic('/bin/busybox'), { needed: [] });
});

test('a file that is not ELF is undefined', (t) => {
  t.is(readElfDynamic(`${ROOT}package.json`), undefined);
});
