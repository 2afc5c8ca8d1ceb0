// ava's settings (a file rather than package.json's "ava" field, for the groups below).
//
// `npm test` (scripts/test-ts.ts) runs the others group here, two files at a time, and each
// cluster file in an ava run of its own beside it (scripts/lib/test-groups.ts says which are
// which). With NETPLUG_TEST_GROUP unset (`npx ava <file>`), every file, two at a time, clusters
// first.
import { ALL, byRank, groups } from './scripts/lib/test-groups.ts';

const group = process.env.NETPLUG_TEST_GROUP;
if (group !== undefined && group !== 'clusters' && group !== 'others')
  throw new Error(`NETPLUG_TEST_GROUP is "${group}": clusters or others`);

export default {
  files: group ? groups[group] : [ALL],
  extensions: ['ts'],
  workerThreads: false,
  timeout: '10m',
  concurrency: 2,
  sortTestFiles: byRank,
};
