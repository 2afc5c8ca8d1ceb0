// What the routes subsystem says of the blocks it leaves unrouted (ts/node/routes/route-notes.ts):
// a new note at info, a warning only for one still standing after the grace period, once.
import test from 'ava';

import { RouteNotes } from '../../ts/node/routes/route-notes.ts';

function recorder() {
  const lines: string[] = [];
  return { lines, log: { info: (text: string) => lines.push(`info ${text}`), warning: (text: string) => lines.push(`warning ${text}`) } };
}

test('a note that goes within the grace period is never a warning; one that stands is warned of once', (t) => {
  const { lines, log } = recorder();
  let now = 0;
  const notes = new RouteNotes(log, () => now, 60_000);
  t.is(notes.seen(['node "b" has not published its address']), 60_000, 'due in a minute');
  now = 10_000;
  t.is(notes.seen(['node "b" has not published its address', 'pool "p" is odd']), 50_000);
  now = 20_000;
  t.is(notes.seen(['pool "p" is odd']), 50_000, 'b published: only the pool is due');
  now = 70_000;
  t.is(notes.seen(['pool "p" is odd']), undefined);
  now = 200_000;
  t.is(notes.seen(['pool "p" is odd']), undefined, 'warned of once');
  t.deepEqual(lines, ['info node "b" has not published its address', 'info pool "p" is odd', 'warning still, after 60 s: pool "p" is odd']);
});

test('a note that goes and comes back starts its grace period again', (t) => {
  const { lines, log } = recorder();
  let now = 0;
  const notes = new RouteNotes(log, () => now, 1000);
  notes.seen(['x']);
  now = 900;
  notes.seen([]);
  now = 1500;
  t.is(notes.seen(['x']), 1000);
  t.deepEqual(lines, ['info x', 'info x']);
});
