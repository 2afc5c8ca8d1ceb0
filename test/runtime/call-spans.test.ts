// Named spans of a served call (ts/runtime/call-spans.ts) reach the call's timings
// (ts/node/cni/call-timings.ts, NETPLUG_CNI_TIMINGS_FILE) from code that knows no call, also
// across awaits; outside a call, `span` only runs its work.
import { setTimeout as sleep } from 'node:timers/promises';

import test from 'ava';

import { monotonicMs } from '../../ts/dataplane/timing.ts';
import { CallTrace } from '../../ts/node/cni/call-timings.ts';
import { span } from '../../ts/runtime/call-spans.ts';

test("a span marked in a call's work is in its timings by name; outside a call span only runs the work", async (t) => {
  t.is(await span('outside', () => 7), 7);
  const trace = new CallTrace(undefined);
  trace.go = monotonicMs();
  const answer = await trace.run(async () => {
    await sleep(1);
    // Work the call started, as the policy pass an ADD waits for.
    return span('policy: kernel write', async () => {
      await sleep(2);
      return 'written';
    });
  });
  t.is(answer, 'written');
  const timings = trace.answered('ADD', 'c1', monotonicMs());
  t.deepEqual(Object.keys(timings.spansMs ?? {}), ['policy: kernel write']);
  t.true((timings.spansMs?.['policy: kernel write'] ?? 0) > 0);
});
