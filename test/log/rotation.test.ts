// The log file shared by many plugin processes: no record lost, torn or duplicated while 16
// processes append and rotate at once; rotated files pruned by count and by age.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { RotatingFile } from '../../ts/log/rotating-file.ts';
import { tempDir } from '../helpers/cni.ts';

const WRITER = new URL('../fixtures/log-writer.ts', import.meta.url).pathname;
const RECORD = /^writer=(\d+) line=(\d+) x{60} end$/;

function runWriters(path: string, writers: number, lines: number, maxBytes: number, maxCount: number): Promise<void> {
  return Promise.all(
    Array.from(
      { length: writers },
      (_, w) =>
        new Promise<void>((resolve, reject) => {
          const child = spawn(process.execPath, [WRITER, path, String(w), String(lines), String(maxBytes), String(maxCount)], {
            stdio: 'inherit',
          });
          child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`writer ${w} exited with ${code}`))));
        }),
    ),
  ).then(() => undefined);
}

function logFiles(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.endsWith('.log'));
}

test('16 processes appending and rotating at once lose, tear and duplicate nothing', async (t) => {
  const dir = tempDir(t, 'log');
  const path = join(dir, 'cni.log');
  const [writers, lines, maxBytes] = [16, 400, 32 * 1024];
  await runWriters(path, writers, lines, maxBytes, 1000);

  const files = logFiles(dir);
  t.true(files.length > 10, `the file was rotated (${files.length} files)`);
  const seen = new Set<string>();
  for (const name of files) {
    const content = readFileSync(join(dir, name), 'utf8');
    t.true(content.endsWith('\n'), `${name} ends with a whole record`);
    for (const line of content.slice(0, -1).split('\n')) {
      const match = RECORD.exec(line);
      t.truthy(match, `an intact record in ${name}: ${line.slice(0, 80)}`);
      const key = `${match?.[1]}:${match?.[2]}`;
      t.false(seen.has(key), `record ${key} appears once`);
      seen.add(key);
    }
    if (name !== 'cni.log') {
      // A file rotates once it reaches the limit; writers that checked before then add a record
      // each, and a writer that waited 200 ms for another's rotation writes anyway (a rotating
      // process descheduled on a loaded machine): bounded well below twice the limit, not exactly.
      t.true(statSync(join(dir, name)).size < 2 * maxBytes, `${name} stayed near the limit`);
    }
  }
  t.is(seen.size, writers * lines, 'every record is somewhere');
  t.deepEqual(
    readdirSync(dir).filter((name) => name.endsWith('.rotating')),
    [],
    'no lock left behind',
  );
});

test('rotated files are pruned to the count limit', async (t) => {
  const dir = tempDir(t, 'log');
  await runWriters(join(dir, 'cni.log'), 4, 300, 8 * 1024, 3);
  const rotated = logFiles(dir).filter((name) => name !== 'cni.log');
  t.true(rotated.length <= 3, `kept ${rotated.length} rotated files`);
  t.true(
    rotated.every((name) => /^cni-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}Z(\.\d+)?\.log$/.test(name)),
    rotated.join(', '),
  );
});

test('rotated files older than the age limit are removed at the next rotation', (t) => {
  const dir = tempDir(t, 'log');
  const old = join(dir, 'cni-2020-01-01T00-00-00.000Z.log');
  const recent = join(dir, 'cni-2026-01-01T00-00-00.000Z.log');
  writeFileSync(old, 'old\n');
  writeFileSync(recent, 'recent\n');
  const fortyDaysAgo = new Date(Date.now() - 40 * 86_400_000);
  utimesSync(old, fortyDaysAgo, fortyDaysAgo);
  const file = new RotatingFile(join(dir, 'cni.log'), { maxBytes: 100, maxAgeDays: 30, maxCount: 10 });
  for (let i = 0; i < 5; i++) file.write(`${'y'.repeat(60)}\n`);
  file.close();
  const names = logFiles(dir);
  t.false(names.includes('cni-2020-01-01T00-00-00.000Z.log'), 'the 40-day-old file is gone');
  t.true(names.includes('cni-2026-01-01T00-00-00.000Z.log'), 'the recent one stays');
});

test('max age is applied when a process opens the log, not only when it rotates', (t) => {
  const dir = tempDir(t, 'log');
  const path = join(dir, 'cni.log');
  const old = join(dir, 'cni-2026-01-01T00-00-00.000Z.log');
  const recent = join(dir, 'cni-2026-11-20T00-00-00.000Z.log');
  writeFileSync(old, 'old\n');
  writeFileSync(recent, 'recent\n');
  const fortyDaysAgo = (Date.now() - 40 * 86_400_000) / 1000;
  utimesSync(old, fortyDaysAgo, fortyDaysAgo);
  const file = new RotatingFile(path, { maxBytes: 1024 * 1024, maxAgeDays: 30, maxCount: 10 });
  file.write('a record far below the size limit\n');
  file.close();
  t.deepEqual(logFiles(dir).sort(), ['cni-2026-11-20T00-00-00.000Z.log', 'cni.log']);
});

test('a log kept open (netplug-node serving commands) prunes old rotations again hourly, not at every record', (t) => {
  const dir = tempDir(t, 'log');
  const path = join(dir, 'cni.log');
  const file = new RotatingFile(path, { maxBytes: 1024 * 1024, maxAgeDays: 30, maxCount: 10 });
  t.teardown(() => file.close());
  file.write('first\n');
  // A rotation another process made 40 days ago (its file's time says so), seen after the first prune.
  const old = join(dir, 'cni-2026-01-01T00-00-00.000Z.log');
  writeFileSync(old, 'old\n');
  const fortyDaysAgo = (Date.now() - 40 * 86_400_000) / 1000;
  utimesSync(old, fortyDaysAgo, fortyDaysAgo);
  file.write('second\n');
  t.true(logFiles(dir).includes('cni-2026-01-01T00-00-00.000Z.log'), 'not pruned by every record');
  const now = Date.now;
  Date.now = () => now() + 3_600_000;
  try {
    file.write('an hour later\n');
  } finally {
    Date.now = now;
  }
  t.deepEqual(logFiles(dir).sort(), ['cni.log']);
  t.is(readFileSync(path, 'utf8'), 'first\nsecond\nan hour later\n');
});

test('a FIFO, a directory or a device as the log path is refused without blocking', (t) => {
  const dir = tempDir(t, 'log');
  const fifo = join(dir, 'cni.log');
  execFileSync('mkfifo', [fifo]);
  for (const path of [fifo, dir, '/dev/null']) {
    const file = new RotatingFile(path, { maxBytes: 1024, maxAgeDays: 30, maxCount: 10 });
    t.throws(() => file.write('x\n'), { message: /is not a regular file|EISDIR/ });
    file.close();
  }
});
