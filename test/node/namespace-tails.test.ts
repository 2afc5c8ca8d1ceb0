// NamespaceTails (ts/node/cni/namespace-tails.ts): a call naming a namespace waits for the kernel
// work earlier calls on that namespace handed over, and for nothing else.
import test from 'ava';

import { NamespaceTails } from '../../ts/node/cni/namespace-tails.ts';

const deferred = () => {
  let resolve = () => {};
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
};

test('a later call on the namespace waits for the work handed over, failed or not; other namespaces do not', async (t) => {
  const tails = new NamespaceTails();
  const deletion = deferred();
  tails.add('/run/netns/a', [deletion.promise]);
  tails.add('/run/netns/a', [Promise.reject(new Error('a deletion that failed'))]);
  t.is(tails.pending('/run/netns/b'), undefined);
  t.is(tails.pending(undefined), undefined);
  let waited = false;
  const next = tails.pending('/run/netns/a')?.then(() => (waited = true));
  await new Promise((resolve) => setImmediate(resolve));
  t.false(waited, 'still waiting while the first deletion runs');
  deletion.resolve();
  await next;
  t.true(waited);
  t.is(tails.pending('/run/netns/a'), undefined, 'forgotten once ended');
});

test('a call that handed nothing over leaves nothing to wait for', (t) => {
  const tails = new NamespaceTails();
  tails.add('/run/netns/a', []);
  tails.add(undefined, [Promise.resolve()]);
  t.is(tails.pending('/run/netns/a'), undefined);
});
