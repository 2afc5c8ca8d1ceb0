// A skipped test is a failing test: no test may be parked with skip/todo/failing or #[ignore],
// and the namespace tests must be running as root (they fail, never skip, otherwise).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

const ROOT = new URL('../', import.meta.url).pathname;

function files(dir: string, pattern: RegExp): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((name) => pattern.test(name))
    .map((name) => join(dir, name));
}

test('no test is skipped, parked or expected to fail', (t) => {
  const parked = /\b(test|it|describe)\.(skip|todo|failing)\b|#\[ignore\]/;
  const offenders = [...files('test', /\.ts$/), ...files('crates', /\/tests\/.*\.rs$|\/src\/.*\.rs$/)]
    .filter((file) => file !== 'test/suite.test.ts')
    .filter((file) => parked.test(readFileSync(join(ROOT, file), 'utf8')));
  t.deepEqual(offenders, []);
});

test('the suite runs as root', (t) => {
  t.is(process.getuid?.(), 0, 'run npm test as root: the namespace tests need it');
});

// bash whose stdin is a socket (Node's pipes are socket pairs) reads ~/.bashrc as if run by rshd:
// a machine's rc file then runs in every probe (pyenv's rehash, for one, waits up to a minute on a
// lock a killed run left). `bash --norc` reads none.
test('every bash the tests and scripts start reads no rc file (--norc)', (t) => {
  const started = /'bash',(?!\s*'--norc')/;
  const offenders = [...files('test', /\.ts$/), ...files('scripts', /\.ts$/), ...files('bench', /\.ts$/)]
    .filter((file) => file !== 'test/suite.test.ts')
    .filter((file) => started.test(readFileSync(join(ROOT, file), 'utf8')));
  t.deepEqual(offenders, []);
});
