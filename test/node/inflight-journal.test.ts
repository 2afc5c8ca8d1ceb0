// The journal of unfinished ADDs (ts/node/cni/inflight-journal.ts) on a real file system: an
// entry is there from record() to remove(), in a slot the next ADD reuses; an unreadable one is
// discarded; a directory removed while the agent runs is made again; entries a previous release
// wrote (a file each) are rolled back and removed too.
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

function journalIn(t: { teardown(fn: () => void): void }, dir: string): InflightJournal {
  const journal = new InflightJournal(dir);
  t.teardown(() => journal.close());
  return journal;
}

const containers = (journal: InflightJournal) => journal.entries().map((found) => found.entry.env['CNI_CONTAINERID']);

test('an entry is left behind from record() until remove(), with what the ADD was given; the directory is made, private', (t) => {
  const dir = join(scratch(t), 'inflight');
  const journal = journalIn(t, dir);
  const path = journal.record(entry('c1'));
  t.is(statSync(dir).mode & 0o777, 0o700);
  t.is(statSync(path).mode & 0o777, 0o600);
  // Seen by another reader, as the next run of the agent sees it.
  const [left] = journalIn(t, dir).leftBehind();
  t.is(left?.path, path);
  t.deepEqual(left?.entry.env, entry('c1').env);
  t.is(left?.entry.stdin.toString(), '{"cniVersion":"1.1.0"}');
  t.is(left?.entry.program, 'netplug');
  t.is(left?.entry.pid, 42);
  journal.remove(path);
  t.deepEqual(journalIn(t, dir).leftBehind(), []);
});

test('a cleared slot takes the next ADD: no file per ADD; ADDs at once each have a slot', (t) => {
  const dir = scratch(t);
  const journal = journalIn(t, dir);
  for (let i = 0; i < 5; i++) journal.remove(journal.record(entry(`c${i}`)));
  t.deepEqual(readdirSync(dir), ['slot-0']);
  const paths = ['a', 'b', 'c'].map((id) => journal.record(entry(id)));
  t.is(new Set(paths).size, 3);
  t.deepEqual(containers(journal), ['a', 'b', 'c']);
  // A longer entry then a shorter one in the same slot: the shorter is read whole, nothing after it.
  journal.remove(paths[1] as string);
  const long = journal.record({ ...entry('long'), stdin: Buffer.alloc(4000, 'x') });
  journal.remove(long);
  t.is(journal.record(entry('d')), long);
  t.deepEqual(containers(journal), ['a', 'd', 'c']);
});

test('an unreadable entry is discarded; others are kept; free slots of a previous run are removed', (t) => {
  const dir = scratch(t);
  const previous = new InflightJournal(dir);
  const kept = previous.record(entry('c1'));
  const torn = previous.record(entry('c2'));
  previous.remove(previous.record(entry('c3')));
  previous.close();
  writeFileSync(torn, Buffer.from([0, 0, 0, 200, ...Buffer.from('{"env":{"CNI_COMM')]));
  const journal = journalIn(t, dir);
  t.deepEqual(
    journal.leftBehind().map((found) => found.path),
    [kept],
  );
  t.deepEqual(readdirSync(dir), [kept.slice(dir.length + 1)]);
  // The next ADD takes a slot of its own while the kept entry waits for its roll-back.
  t.not(journal.record(entry('c4')), kept);
});

test('a directory removed while the agent runs is made again by the next record()', (t) => {
  const dir = join(scratch(t), 'inflight');
  const journal = journalIn(t, dir);
  journal.remove(journal.record(entry('c1')));
  rmSync(dir, { recursive: true });
  const path = journal.record(entry('c2'));
  t.is(journalIn(t, dir).leftBehind()[0]?.path, path);
});

test("a previous release's entries (a file each) are left behind, and removed once rolled back", (t) => {
  const dir = scratch(t);
  const stored = { env: entry('old').env, stdin: entry('old').stdin.toString('base64'), program: 'netplug', pid: 7 };
  const legacy = join(dir, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.json');
  writeFileSync(legacy, JSON.stringify(stored), { mode: 0o600 });
  writeFileSync(join(dir, 'half.json'), '{"env":');
  const journal = journalIn(t, dir);
  const [left, ...rest] = journal.leftBehind();
  t.deepEqual(rest, []);
  t.is(left?.path, legacy);
  t.is(left?.entry.env['CNI_CONTAINERID'], 'old');
  journal.remove(legacy);
  t.deepEqual(readdirSync(dir), []);
});
