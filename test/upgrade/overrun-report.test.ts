// The upgrade tests' overrun guard on its own, with a stand-in cluster (what it reports is
// kubectl's output, whatever the cluster): an overrun fails with the phase and the report, and the
// body stops at its next phase instead of going on after the failure.
import { setTimeout as sleep } from 'node:timers/promises';

import test from 'ava';

import type { Cluster } from '../helpers/cluster.ts';
import { Whereabouts, withinLimit } from './overrun-report.ts';

const standIn = (() => ({ kubectl: async (...args: string[]) => `(kubectl ${args.join(' ')})` })) as unknown as () => Cluster;

test('a body within its limit gives its value', async (t) => {
  const where = new Whereabouts();
  const value = await withinLimit(t, 5_000, standIn, where, async () => {
    where.enter('one step');
    return 42;
  });
  t.is(value, 42);
});

test('an overrun fails with its phase and the report, and the body stops at its next phase', async (t) => {
  const where = new Whereabouts();
  const reached: string[] = [];
  const failure = await t.throwsAsync(
    withinLimit(t, 200, standIn, where, async () => {
      where.enter('waiting for the rollout', () => 'netplugctl: waiting for netplug-node');
      reached.push('waiting');
      await sleep(600);
      where.enter('checking the pods');
      reached.push('checking');
    }),
  );
  t.regex(failure?.message ?? '', /still running after 0 min, 0 s into: waiting for the rollout/);
  t.regex(failure?.message ?? '', /--- its output so far:\nnetplugctl: waiting for netplug-node/);
  t.regex(failure?.message ?? '', /--- pods:\n\(kubectl --request-timeout=20s get pods -A -o wide\)/);
  // The body woke after the failure and stopped at its next phase.
  await sleep(600);
  t.deepEqual(reached, ['waiting']);
});

test("a body's own failure is its failure", async (t) => {
  const where = new Whereabouts();
  const failure = await t.throwsAsync(
    withinLimit(t, 5_000, standIn, where, async () => {
      where.enter('applying');
      throw new Error('netplugctl upgrade apply exited with 1');
    }),
  );
  t.is(failure?.message, 'netplugctl upgrade apply exited with 1');
});
