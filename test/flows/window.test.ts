// The aggregator's window (ts/flows/window.ts): ordered by the end of each record's interval,
// bounded by retention and by size, the oldest dropped first, and queried newest last.
import test from 'ava';

import { FlowWindow, jsonBytes } from '../../ts/flows/window.ts';
import { flowRecord } from './records.ts';

const HOUR = 3_600_000;
const T = Date.parse('2026-11-28T12:00:00Z');

test('records are held in the order their intervals ended, newest last, whatever order they arrive in', (t) => {
  const window = new FlowWindow({ retentionMs: HOUR, maxBytes: 1 << 20 });
  const at = (seconds: number, node: string) => flowRecord({ end: T + seconds * 1000, node });
  window.add([at(10, 'a'), at(30, 'c')], T + 60_000);
  window.add([at(20, 'b'), at(5, 'first'), at(40, 'd')], T + 60_000);
  window.add([at(20, 'b2')], T + 60_000);
  t.deepEqual(
    window.query({}, 100).map((record) => record.node),
    ['first', 'a', 'b', 'b2', 'c', 'd'],
  );
  t.is(window.records, 6);
  t.deepEqual(
    window.query({}, 2).map((record) => record.node),
    ['c', 'd'],
    'the newest `limit`, still newest last',
  );
});

test('retention drops the records whose interval ended longer ago, and takes none already that old', (t) => {
  const window = new FlowWindow({ retentionMs: HOUR, maxBytes: 1 << 20 });
  t.deepEqual(window.add([flowRecord({ end: T, node: 'old' }), flowRecord({ end: T + HOUR / 2, node: 'new' })], T + HOUR / 2), {
    retention: 0,
    size: 0,
  });
  t.deepEqual(window.expire(T + HOUR + 1), { retention: 1, size: 0 });
  t.deepEqual(
    window.query({}, 10).map((record) => record.node),
    ['new'],
  );
  t.deepEqual(window.add([flowRecord({ end: T, node: 'late' })], T + HOUR + 1), { retention: 1, size: 0 }, 'arrived already past');
  t.is(window.records, 1);
  t.is(window.bytes, jsonBytes(flowRecord({ end: T + HOUR / 2, node: 'new' })));
});

test('a record from a clock ahead is placed, and expires, as of when it arrived', (t) => {
  const window = new FlowWindow({ retentionMs: HOUR, maxBytes: 1 << 20 });
  window.add([flowRecord({ end: T + 10 * HOUR, node: 'ahead' })], T);
  window.add([flowRecord({ end: T + 1000, node: 'later' })], T + 2000);
  t.deepEqual(
    window.query({}, 10).map((record) => record.node),
    ['ahead', 'later'],
  );
  t.deepEqual(window.expire(T + HOUR + 1), { retention: 1, size: 0 });
});

test('beyond the size, the oldest go first; the bytes counted are each record as JSON', (t) => {
  const size = jsonBytes(flowRecord({ end: T, node: 'n-0' }));
  const window = new FlowWindow({ retentionMs: HOUR, maxBytes: size * 3 });
  const batch = [0, 1, 2, 3, 4].map((i) => flowRecord({ end: T + i, node: `n-${i}` }));
  t.deepEqual(window.add(batch, T + 10), { retention: 0, size: 2 });
  t.deepEqual(
    window.query({}, 10).map((record) => record.node),
    ['n-2', 'n-3', 'n-4'],
  );
  t.is(window.bytes, size * 3);
  // An older record arriving now is the oldest: it is the one dropped.
  t.deepEqual(window.add([flowRecord({ end: T - 5, node: 'n-x' })], T + 10), { retention: 0, size: 1 });
  t.deepEqual(
    window.query({}, 10).map((record) => record.node),
    ['n-2', 'n-3', 'n-4'],
  );
});

test('queries filter, and the window stays whole across many drops (compaction)', (t) => {
  const window = new FlowWindow({ retentionMs: 5000, maxBytes: 1 << 30 });
  for (let i = 0; i < 10_000; i++) {
    const action = i % 2 === 0 ? 'Allow' : 'Deny';
    window.add([flowRecord({ end: T + i * 10, node: `n-${i}`, action })], T + i * 10);
  }
  // 5 s at one record each 10 ms: the last 501 records (the oldest's end is exactly at the cutoff).
  t.is(window.records, 501);
  const denied = window.query({ action: 'Deny' }, 3);
  t.deepEqual(
    denied.map((record) => record.node),
    ['n-9995', 'n-9997', 'n-9999'],
  );
  t.deepEqual(window.expire(T + 1e9), { retention: 501, size: 0 });
  t.is(window.records, 0);
  t.is(window.bytes, 0);
  t.deepEqual(window.query({}, 10), []);
});
