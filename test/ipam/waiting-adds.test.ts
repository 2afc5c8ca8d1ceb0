// The waiting ADDs' queue (pure logic): oldest first, per node, served ones told their addresses,
// and others for a handle a commit just created left to their own turns.
import test from 'ava';

import type { PendingRequest } from '../../ts/model/ipam-documents.ts';
import { ownWrites, WaitingAdds } from '../../ts/ipam/waiting-adds.ts';

const request = (handle: string): PendingRequest => ({ handle, attributes: {}, requests: [{ family: 4, pools: ['p'] }], created: '' });
const served = (handle: string) => ({
  handle: { key: `/h/${handle}`, value: { handleID: handle, block: {}, deleted: false }, revision: '1' },
  allocations: [{ address: '10.0.0.1', family: 4 as const, block: '10.0.0.0/26' }],
  companionsWritten: false,
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

test("a waiting ADD's own documents go with the commit that serves it only where it knows how each stands", (t) => {
  const endpoint = { key: '/wep/a', value: (addresses: readonly string[], current: unknown) => ({ addresses, had: current ?? null }) };
  const other = { key: '/wep/b', value: () => ({}) };
  t.is(ownWrites([endpoint], {}), undefined, 'nothing read: it writes them itself once served');
  t.is(ownWrites([endpoint, other], { companions: { '/wep/a': null } }), undefined, 'one of them not read');
  t.is(ownWrites([], { companions: {} }), undefined, 'none to write');
  t.deepEqual(ownWrites([endpoint], { companions: { '/wep/a': null } })?.(['10.0.0.1']), [
    { key: '/wep/a', create: { addresses: ['10.0.0.1'], had: null } },
  ]);
  t.deepEqual(ownWrites([endpoint], { companions: { '/wep/a': { key: '/wep/a', value: { old: true }, revision: '7' } } })?.(['10.0.0.2']), [
    { key: '/wep/a', update: { addresses: ['10.0.0.2'], had: { old: true } }, revision: '7' },
  ]);
});
