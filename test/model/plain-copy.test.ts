// plainCopy: a deep copy of a datastore document that shares nothing with the original, as the
// agent's known blocks need (a plan changes its copy in place; a failed commit must leave the
// known block as it was).
import test from 'ava';

import { plainCopy } from '../../ts/model/plain-copy.ts';

test('a block copied shares no object or array with the original, and equals it', (t) => {
  const block = {
    key: '/netplug/ipam/v2/assignment/ipv4/block/10.1.0.0-26',
    revision: '17',
    value: {
      cidr: '10.1.0.0/26',
      affinity: 'host:node-a',
      allocations: [0, null, 1],
      unallocated: [3, 4],
      attributes: [{ handle_id: 'net.c1', secondary: { pod: 'web', note: undefined } }],
      sequenceNumber: 2,
      deleted: false,
    },
  };
  const copy = plainCopy(block);
  t.deepEqual(copy, block);
  t.true('note' in copy.value.attributes[0]!.secondary, 'an undefined field is kept');
  copy.value.allocations[1] = 2;
  copy.value.unallocated.shift();
  copy.value.attributes[0]!.secondary.pod = 'db';
  copy.value.attributes.push({ handle_id: 'net.c2', secondary: { pod: 'x', note: undefined } });
  t.deepEqual(block.value.allocations, [0, null, 1]);
  t.deepEqual(block.value.unallocated, [3, 4]);
  t.is(block.value.attributes.length, 1);
  t.is(block.value.attributes[0]!.secondary.pod, 'web');
});

test('what is not plain data is copied as structuredClone copies it', (t) => {
  const at = new Date('2026-11-30T00:00:00Z');
  const copy = plainCopy({ at, nested: [new Map([['a', 1]])], none: null });
  t.not(copy.at, at);
  t.is(copy.at.getTime(), at.getTime());
  t.true(copy.at instanceof Date);
  t.deepEqual([...(copy.nested[0] ?? [])], [['a', 1]]);
  t.is(copy.none, null);
});
