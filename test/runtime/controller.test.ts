// The reconcile runner (ts/runtime/controller.ts, work-queue.ts) on a fake clock: coalesced
// triggers, one reconcile per key at a time, requeueAfter, backoff with jitter after a failure
// (reset by a success, which also drops the retries and requeues it supersedes), the periodic resync, a clean stop, and the two timing faults of the loops
// it replaces (a lost wake-up; a retry after a failure waiting for the whole period).
import test from 'ava';

import { Controller, type Reconcile, type Requeue } from '../../ts/runtime/controller.ts';
import { WorkQueue } from '../../ts/runtime/work-queue.ts';
import { FakeClock, settle } from '../helpers/fake-clock.ts';

/** A log that keeps its lines. */
function collect() {
  const lines: string[] = [];
  const at = (level: string) => (message: string) => lines.push(`${level} ${message}`);
  return { lines, log: { error: at('ERROR'), warning: at('WARNING'), info: at('INFO'), debug: at('DEBUG') } };
}

/** A promise and its resolution, for reconciles a test finishes when it wants. */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

/** A controller on `clock` that records each reconcile's key and time. */
function recorded(clock: FakeClock, reconcile: Reconcile, options: Partial<ConstructorParameters<typeof Controller>[0]> = {}) {
  const calls: { key: string; at: number }[] = [];
  const { lines, log } = collect();
  const controller = new Controller({
    name: 'test',
    log,
    clock,
    backoff: { initialMs: 1000, maxMs: 60_000, jitter: 0.1, random: () => 0.5 },
    ...options,
    reconcile: (key, signal) => {
      calls.push({ key, at: clock.now() });
      return reconcile(key, signal);
    },
  });
  const stop = new AbortController();
  const running = controller.run(stop.signal);
  return {
    controller,
    calls,
    lines,
    stop: () => {
      stop.abort();
      return running;
    },
  };
}

const ok: Reconcile = async () => undefined;

test('the work queue: a waiting key coalesces, a key being processed comes back once after done, delays keep the earlier time', async (t) => {
  const clock = new FakeClock();
  const queue = new WorkQueue<string>({ clock });
  queue.add('a');
  queue.add('a');
  queue.add('b');
  t.is(queue.length, 2);
  t.is(await queue.get(), 'a');
  queue.add('a');
  queue.add('a');
  t.is(await queue.get(), 'b', 'a is being processed: added again, it waits for done');
  queue.done('b');
  t.is(queue.length, 0);
  queue.done('a');
  t.is(queue.length, 1, 'a comes back once');
  t.is(await queue.get(), 'a');
  queue.done('a');
  queue.addAfter('c', 500);
  queue.addAfter('c', 100);
  queue.addAfter('c', 900);
  await clock.advance(99);
  t.is(queue.length, 0);
  await clock.advance(1);
  t.is(queue.length, 1, 'the earliest of the delays wins');
  await clock.advance(1000);
  t.is(queue.length, 1, 'and the later ones were dropped');
  queue.shutDown();
  t.is(await queue.get(), undefined);
});

test('triggers for a key coalesce; a key is never reconciled twice at once; distinct keys run side by side', async (t) => {
  const clock = new FakeClock();
  const running = new Set<string>();
  let overlap = false;
  let most = 0;
  const gates = new Map<string, ReturnType<typeof deferred<void>>>();
  const { controller, calls, stop } = recorded(
    clock,
    async (key) => {
      if (running.has(key)) overlap = true;
      running.add(key);
      most = Math.max(most, running.size);
      const gate = deferred();
      gates.set(key, gate);
      await gate.promise;
      running.delete(key);
      return undefined;
    },
    { workers: 4 },
  );
  controller.enqueue('a');
  controller.enqueue('b');
  await settle();
  t.deepEqual(
    calls.map((c) => c.key),
    ['a', 'b'],
  );
  for (let i = 0; i < 5; i++) controller.enqueue('a');
  await settle();
  t.is(calls.length, 2, 'a is still being reconciled: the triggers wait');
  gates.get('a')?.resolve();
  await settle();
  t.deepEqual(
    calls.map((c) => c.key),
    ['a', 'b', 'a'],
    'five triggers during the reconcile give one more',
  );
  gates.get('a')?.resolve();
  gates.get('b')?.resolve();
  await settle();
  t.false(overlap);
  t.is(most, 2, 'a and b ran at the same time');
  await stop();
});

test('requeueAfter brings the key back at that time, not before', async (t) => {
  const clock = new FakeClock();
  const start = clock.now();
  let first = true;
  const { controller, calls, stop } = recorded(clock, async (): Promise<Requeue | undefined> => {
    if (!first) return undefined;
    first = false;
    return { requeueAfterMs: 5000 };
  });
  controller.enqueue('k');
  await clock.advance(4999);
  t.is(calls.length, 1);
  await clock.advance(1);
  t.deepEqual(
    calls.map((c) => c.at - start),
    [0, 5000],
  );
  await clock.advance(60_000);
  t.is(calls.length, 2, 'no resync: nothing more');
  await stop();
});

test('a failed reconcile is retried after its backoff, doubling with jitter, and a success resets it', async (t) => {
  const clock = new FakeClock();
  const start = clock.now();
  const outcomes = [false, false, false, true, false, true];
  const { controller, calls, lines, stop } = recorded(clock, async () => {
    if (!outcomes.shift()) throw new Error('etcd at http://10.0.0.1:2379 is unreachable');
    return undefined;
  });
  controller.enqueue('k');
  await clock.advance(20_000);
  // Failures at 0, +1050 (1000 and 5 % jitter), +2100, +4200; the success at 7350; a later trigger
  // fails, and is retried after 1050 again.
  t.deepEqual(
    calls.map((c) => c.at - start),
    [0, 1050, 3150, 7350],
  );
  controller.enqueue('k');
  await clock.advance(5000);
  t.deepEqual(
    calls.slice(4).map((c) => c.at - start),
    [20_000, 21_050],
  );
  t.deepEqual(lines, [
    'WARNING test controller: reconciling k failed, retrying in 1.1 s: etcd at http://10.0.0.1:2379 is unreachable',
    'INFO test controller: k reconciled again',
    'WARNING test controller: reconciling k failed, retrying in 1.1 s: etcd at http://10.0.0.1:2379 is unreachable',
    'INFO test controller: k reconciled again',
  ]);
  await stop();
});

test('a success drops the retries and requeues it supersedes, not a trigger that came while it ran', async (t) => {
  const clock = new FakeClock();
  const start = clock.now();
  let fail = true;
  let running: ReturnType<typeof deferred<void>> | undefined;
  const { controller, calls, stop } = recorded(
    clock,
    async () => {
      if (fail) {
        fail = false;
        throw new Error('the route could not be written');
      }
      await running?.promise;
      return undefined;
    },
    { settleMs: 200 },
  );
  controller.enqueue('k');
  await settle();
  // The retry is due at +1050; an event's pass at +500 succeeds, reading the state after it.
  await clock.advance(500);
  controller.enqueue('k');
  await clock.advance(5000);
  t.deepEqual(
    calls.map((c) => c.at - start),
    [0, 500],
    'no pass at +1050: it would only repeat the one at +500',
  );
  // A trigger while a pass runs waits its settle delay and gets a pass of its own.
  const pass = deferred<void>();
  running = pass;
  controller.enqueue('k');
  await settle();
  controller.trigger('k');
  running = undefined;
  pass.resolve();
  await clock.advance(1000);
  t.deepEqual(
    calls.slice(2).map((c) => c.at - start),
    [5500, 5700],
  );
  await stop();
});

test("after a failed pass the retry comes after the backoff, not after the resync period (netplug-kube-controllers' old loop waited 60 s)", async (t) => {
  const clock = new FakeClock();
  const start = clock.now();
  let failures = 1;
  const { calls, stop } = recorded(
    clock,
    async () => {
      if (failures-- > 0) throw new Error('waiting for a complete list of nodes');
      return undefined;
    },
    { resyncMs: 60_000, keys: () => ['nodes'], backoff: undefined },
  );
  await clock.advance(2000);
  t.is(calls.length, 2, 'retried within the first backoff (1 s and at most 10 % jitter)');
  t.true((calls[1]?.at ?? 0) - start <= 1100);
  await stop();
});

test('every known key is reconciled again each resync period', async (t) => {
  const clock = new FakeClock();
  const start = clock.now();
  const { controller, calls, stop } = recorded(clock, ok, { resyncMs: 10_000, keys: () => ['listed'] });
  controller.enqueue('enqueued');
  await clock.advance(25_000);
  t.deepEqual(
    calls.map((c) => `${c.key}@${c.at - start}`),
    ['listed@0', 'enqueued@0', 'listed@10000', 'enqueued@10000', 'listed@20000', 'enqueued@20000'],
  );
  await stop();
});

test('a lost wake-up cannot happen: a trigger after a late settle timer of an earlier trigger fired gets its pass promptly', async (t) => {
  // The fault of netplug-operator's old loop: a trigger during a sleep armed a settle timer; when
  // the sleep's own timer fired first, that settle timer stayed armed, and firing during the next
  // sleep it cleared the next sleep's wake-up, so the next trigger waited out the whole period
  // (here until 120 000 instead of 61 100).
  const clock = new FakeClock();
  const start = clock.now();
  const { controller, calls, stop } = recorded(clock, ok, { resyncMs: 60_000, settleMs: 100, keys: () => ['k'] });
  const passes = () => calls.map((c) => c.at - start);
  await clock.advance(59_950);
  controller.trigger('k'); // settles at 60 050; the resync at 60 000 comes first
  await clock.advance(50);
  t.deepEqual(passes(), [0, 60_000]);
  await clock.advance(1000); // 61 000: the late settle timer was dropped, the resync's pass covering it
  controller.trigger('k');
  await clock.advance(100);
  t.deepEqual(passes(), [0, 60_000, 61_100], 'the trigger after the late timer is not lost');

  // A trigger after the pass that dropped such a timer settles from its own time.
  await clock.advance(119_950 - 61_100);
  controller.trigger('k'); // would settle at 120 050; the resync at 120 000 covers it
  await clock.advance(60);
  controller.trigger('k'); // 120 010: settles at 120 110
  await clock.advance(40);
  t.deepEqual(passes().slice(3), [120_000]);
  await clock.advance(1000);
  controller.trigger('k');
  await clock.advance(100);
  t.deepEqual(passes().slice(3), [120_000, 120_110, 121_150]);
  await stop();
});

test('run stops when its signal aborts, after the running reconcile; keys enqueued while stopped come at the next run', async (t) => {
  const clock = new FakeClock();
  const gate = deferred();
  let calls = 0;
  const controller = new Controller({
    name: 'test',
    log: collect().log,
    clock,
    reconcile: async () => {
      calls++;
      if (calls === 1) await gate.promise;
      return undefined;
    },
  });
  const stop = new AbortController();
  const run = controller.run(stop.signal);
  controller.enqueue('a');
  await settle();
  t.true(controller.running());
  let ended = false;
  void run.then(() => {
    ended = true;
  });
  stop.abort();
  await settle();
  t.false(ended, 'waits for the running reconcile');
  gate.resolve();
  await settle();
  t.true(ended);
  t.false(controller.running());
  t.true(controller.succeeded());

  controller.enqueue('b');
  await settle();
  t.is(calls, 1, 'not running: remembered only');
  const again = new AbortController();
  const rerun = controller.run(again.signal);
  await settle();
  t.is(calls, 3, 'a and b, known keys, at the next start');
  again.abort();
  await rerun;
});
