// The waiting ADDs' queue (pure logic): oldest first, per node, served ones told their addresses,
// and others for a handle a commit just created left to their own turns.
import test from 'ava';

import type { PendingRequest } from '../../ts/model/ipam-documents.ts';
import { WaitingAdds } from '../../ts/ipam/waiting-adds.ts';

const request = (handle: string): PendingRequest => ({ handle, attributes: {}, requests: [{ family: 4, pools: ['p'] }], created: '' });
const served = (handle: string) => ({
  handle: { key: `/h/${handle}`, value: { handleID: handle, block: {}, deleted: false }, revision: '1' },
  allocations: [{ address: '10.0.0.1', family: 4 as const, block: '10.0.0.0/26' }],
});

test('served ADDs learn their addresses and leave; another for a created handle leaves unserved; withdrawn ones are not offered', async (t) => {
  const counts: number[] = [];
  const adds = new WaitingAdds((n) => counts.push(n));
  const [a, b, again, c] = [
    adds.wait('n1', request('a')),
    adds.wait('n1', request('b')),
    adds.wait('n1', request('a')),
    adds.wait('n1', request('c')),
  ];
  const other = adds.wait('n2', request('d'));
  t.deepEqual(adds.waiting('n1', 10), [a, b, again, c], 'oldest first, per node');
  t.deepEqual(adds.waiting('n1', 2), [a, b], 'at most the limit');

  adds.served('n1', ['own', 'a'], [{ add: a, served: served('a') }]);
  t.deepEqual(await a.whenServed, served('a'));
  t.deepEqual(a.served, served('a'));
  t.deepEqual(adds.waiting('n1', 10), [b, c], "the same container's other ADD left to its own turn");
  t.is(again.served, undefined);
  t.deepEqual(counts, [1]);

  adds.withdraw(b);
  t.deepEqual(adds.waiting('n1', 10), [c]);
  adds.served('n1', ['own'], []);
  t.deepEqual(counts, [1], 'a commit that served none is not counted');
  t.deepEqual(adds.waiting('n2', 10), [other]);
});
