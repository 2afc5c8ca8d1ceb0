// Who may write (ts/flows/writers.ts), with the TokenReview replaced by a table of answers: the
// verdicts, and how long and how many of them are kept. The real TokenReview is in
// aggregator.test.ts.
import test from 'ava';

import { NODE_NAME_EXTRA, type Review, Writers } from '../../ts/flows/writers.ts';

const NODE_SA = 'system:serviceaccount:kube-system:netplug-node';

function reviewer(answers: Record<string, Review | Error>) {
  const asked: string[] = [];
  const review = async (token: string): Promise<Review> => {
    asked.push(token);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const answer = answers[token] ?? { authenticated: false, error: 'invalid bearer token' };
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { review, asked };
}

test('verdicts: a writer; its node when the token names one; another account 403; a bad token 401', async (t) => {
  const { review } = reviewer({
    node: { authenticated: true, user: NODE_SA },
    bound: { authenticated: true, user: NODE_SA, extra: { [NODE_NAME_EXTRA]: ['node-a'] } },
    other: { authenticated: true, user: 'system:serviceaccount:shop:default' },
  });
  const writers = new Writers({ review, writers: [NODE_SA] });
  t.deepEqual(await writers.verdict('node'), { allowed: true, user: NODE_SA });
  t.deepEqual(await writers.verdict('bound'), { allowed: true, user: NODE_SA, node: 'node-a' });
  t.like(await writers.verdict('other'), { allowed: false, status: 403, reason: 'forbidden' });
  t.like(await writers.verdict('junk'), {
    allowed: false,
    status: 401,
    reason: 'unauthenticated',
    message: 'the token is not a valid service account token for the audience netplug-flows: invalid bearer token',
  });
});

test('a verdict is kept for the time given, one review serves concurrent requests, a failed review is not kept', async (t) => {
  let now = 1_000_000;
  const answers: Record<string, Review | Error> = { node: { authenticated: true, user: NODE_SA }, down: new Error('connect ECONNREFUSED') };
  const { review, asked } = reviewer(answers);
  const writers = new Writers({ review, writers: [NODE_SA], ttlMs: 60_000, now: () => now });
  await Promise.all([writers.verdict('node'), writers.verdict('node'), writers.verdict('node')]);
  t.deepEqual(asked, ['node']);
  now += 59_000;
  await writers.verdict('node');
  t.deepEqual(asked, ['node'], 'still kept');
  now += 2000;
  await writers.verdict('node');
  t.deepEqual(asked, ['node', 'node'], 'asked again after the time');

  await t.throwsAsync(writers.verdict('down'), { message: 'connect ECONNREFUSED' });
  answers['down'] = { authenticated: true, user: NODE_SA };
  t.like(await writers.verdict('down'), { allowed: true }, 'asked again at once');
});

test('at most maxEntries verdicts are kept, the oldest forgotten first', async (t) => {
  const answers: Record<string, Review> = {};
  for (let i = 0; i < 5; i++) answers[`t${i}`] = { authenticated: true, user: NODE_SA };
  const { review, asked } = reviewer(answers);
  const writers = new Writers({ review, writers: [NODE_SA], maxEntries: 3 });
  for (let i = 0; i < 5; i++) await writers.verdict(`t${i}`);
  t.is(writers.kept, 3);
  await writers.verdict('t4');
  await writers.verdict('t0');
  t.deepEqual(asked, ['t0', 't1', 't2', 't3', 't4', 't0']);
});

test("readers (role read): the accounts NETPLUG_FLOWS_READERS names; a writer is refused in a reader's words", async (t) => {
  const viewer = 'system:serviceaccount:kube-system:netplug-flow-viewer';
  const { review } = reviewer({ viewer: { authenticated: true, user: viewer }, node: { authenticated: true, user: NODE_SA } });
  const readers = new Writers({ review, writers: [viewer], role: 'read' });
  t.deepEqual(await readers.verdict('viewer'), { allowed: true, user: viewer });
  t.deepEqual(await readers.verdict('node'), {
    allowed: false,
    status: 403,
    reason: 'forbidden',
    message: `${NODE_SA} may not read flow records: it is not one of the service accounts NETPLUG_FLOWS_READERS names`,
  });
});
