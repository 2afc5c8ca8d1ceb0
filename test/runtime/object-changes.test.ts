// What counts as a change of an object (ts/runtime/object-changes.ts): its content, whether it came
// from a list (typed, Dates, no kind on items) or a watch (plain JSON, timestamps as text).
import test from 'ava';

import { changesOnlyStatus, sameContent } from '../../ts/runtime/object-changes.ts';

const listed = {
  metadata: { name: 'n1', resourceVersion: '10', creationTimestamp: new Date('2026-01-02T03:04:05Z'), labels: { a: '1' }, uid: undefined },
  spec: { podCIDR: '10.0.0.0/24' },
  status: { conditions: [{ type: 'Ready', status: 'True' }] },
};
const watched = {
  kind: 'Node',
  apiVersion: 'v1',
  metadata: {
    labels: { a: '1' },
    creationTimestamp: '2026-01-02T03:04:05Z',
    name: 'n1',
    resourceVersion: '11',
    managedFields: [{ manager: 'kubelet' }],
  },
  spec: { podCIDR: '10.0.0.0/24' },
  status: { conditions: [{ type: 'Ready', status: 'False' }] },
};

test('a new status, resourceVersion and managedFields are a status-only change, across a list and a watch', (t) => {
  t.true(changesOnlyStatus(listed, watched));
  t.false(changesOnlyStatus(listed, { ...watched, metadata: { ...watched.metadata, labels: { a: '2' } } }), 'a label');
  t.false(changesOnlyStatus(listed, { ...watched, spec: { podCIDR: '10.0.1.0/24' } }), 'the spec');
  t.false(changesOnlyStatus(listed, { ...watched, metadata: { ...watched.metadata, annotations: { x: 'y' } } }), 'an annotation');
});

test('same content: key order, absent and undefined, Date and timestamp text', (t) => {
  t.true(sameContent({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1, d: undefined }));
  t.true(sameContent(new Date('2026-01-02T03:04:05Z'), '2026-01-02T03:04:05.000Z'));
  t.false(sameContent([1, 2], [2, 1]));
  t.false(sameContent({ a: '1' }, { a: 1 }));
});
