// The journal of unfinished ADDs (ts/node/cni/inflight-journal.ts) on a real file system: an
// entry is there from record() to remove(); one half written by an agent that died is discarded;
// a directory removed while the agent runs is made again.
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import test from 'ava';

import { InflightJournal } from '../../ts/node/cni/inflight-journal.ts';

const entry = (containerId: string) => ({
  env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: containerId, CNI_IFNAME: 'eth0', CNI_NETNS: '/run/netns/x' },
  stdin: Buffer.from('{"cniVersion":"1.1.0"}'),
  program: 'netplug' as const,
  pid: 42,
});

function scratch(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'netplug-inflight-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('an entry is left behind from record() until remove(), with what the ADD was given; the directory is made, private', (t) => {
  const dir = join(scratch(t), 'inflight');
  const journal = new InflightJournal(dir);
  const path = journal.record(entry('c1'));
  t.is(statSync(dir).mode & 0o777, 0o700);
  t.is(statSync(path).mode & 0o777, 0o600);
  const [left] = journal.leftBehind();
  t.is(left?.path, path);
  t.deepEqual(left?.entry.env, entry('c1').env);
  t.is(left?.entry.stdin.toString(), '{"cniVersion":"1.1.0"}');
  journal.remove(path);
  t.deepEqual(journal.leftBehind(), []);
});

test('half an entry (the agent died writing it, before the ADD did anything) is discarded; others are kept', (t) => {
  const dir = scratch(t);
  const journal = new InflightJournal(dir);
  const kept = journal.record(entry('c1'));
  const torn = journal.record(entry('c2'));
  writeFileSync(torn, '{"env":{"CNI_COMM');
  t.deepEqual(
    journal.leftBehind().map((found) => found.path),
    [kept],
  );
  t.deepEqual(readdirSync(dir), [kept.slice(dir.length + 1)]);
});

test('a directory removed while the agent runs is made again by the next record()', (t) => {
  const dir = join(scratch(t), 'inflight');
  const journal = new InflightJournal(dir);
  journal.remove(journal.record(entry('c1')));
  rmSync(dir, { recursive: true });
  const path = journal.record(entry('c2'));
  t.is(journal.leftBehind()[0]?.path, path);
});
