// `npm run build:addon -- --target aarch64-unknown-linux-gnu` on this x86-64 machine yields an
// arm64 Linux shared object that Node can load (an N-API module exporting our functions).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { arch } from 'node:os';

import test from 'ava';

const ROOT = new URL('../../', import.meta.url).pathname;
const EM_AARCH64 = 183;

test('the addon cross-builds for aarch64 Linux', (t) => {
  t.timeout(20 * 60_000, 'the first cross-build installs Debian packages and compiles every crate');
  t.is(arch(), 'x64', 'this test cross-builds from x86-64');
  execFileSync('sh', ['scripts/build-addon.sh', '--target', 'aarch64-unknown-linux-gnu'], { cwd: ROOT, stdio: 'ignore' });
  const elf = readFileSync(`${ROOT}native/netplug-dataplane.linux-arm64-gnu.node`);
  t.deepEqual([...elf.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], 'an ELF file');
  t.is(elf[4], 2, '64-bit');
  t.is(elf.readUInt16LE(16), 3, 'a shared object');
  t.is(elf.readUInt16LE(18), EM_AARCH64, 'for aarch64');
  const symbols = execFileSync('aarch64-linux-gnu-nm', ['-D', '--defined-only', `${ROOT}native/netplug-dataplane.linux-arm64-gnu.node`], { encoding: 'utf8' });
  t.regex(symbols, /napi_register_module_v1/, 'an N-API module');
});
