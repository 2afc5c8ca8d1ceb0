// ava's settings (a file rather than package.json's "ava" field, for the groups below).
//
// `npm test` runs the test files in two groups at once (scripts/test-ts.ts), each two files at a
// time:
// - clusters: the files that start real Kubernetes clusters (upgrades, installs) and the
//   executable fuzzing, the longest first. A third cluster beside two starved the machine's two
//   cores (load above 60): each file took several times as long.
// - others: the rest (namespaces, etcd, a kube-apiserver), by name. They fill the quarter of the
//   CPU the clusters leave idle while they wait: one group after the other (the others three at a
//   time) took 26.5 and 14.3 minutes, both at once 36.0.
// Without NETPLUG_TEST_GROUP (`npx ava <file>`), every file, two at a time, clusters first.
import { globSync } from 'node:fs';

const CLUSTERS = ['test/upgrade/', 'test/e2e/', 'test/fuzz/executable'];
// Files under those folders that start no cluster (a kube-apiserver, an etcd at most): the others'.
const NOT_CLUSTERS = [
  'upgrade/allow-all-upgrade-plan',
  'upgrade/previous-release',
  'upgrade/tool-apply',
  'upgrade/tool-plan',
  'upgrade/variant',
  'upgrade/version-records',
];
// The cluster files by their time in a full run, longest first, so that the group does not end
// with one long file running alone; files not named here come after them.
const LONGEST = [
  'upgrade/tool-manifest-kdd',
  'upgrade/host-local',
  'upgrade/tool-host-local',
  'upgrade/tool-operator',
  'upgrade/tool-manifest-etcd',
  'upgrade/tool-helm',
  'upgrade/operator',
  'upgrade/helm',
  'e2e/helm',
  'e2e/datastore-migration',
  'e2e/dual-stack',
  'e2e/kubernetes-datastore',
  'e2e/operator',
  'fuzz/executable',
  'upgrade/manifest-etcd',
  'upgrade/manifest-kdd',
  'e2e/etcd-datastore',
  'e2e/network-policy',
  'e2e/policy-only',
];
const named = (names, file) => names.some((name) => file.endsWith(`test/${name}.test.ts`));
const isCluster = (file) => CLUSTERS.some((prefix) => file.includes(prefix)) && !named(NOT_CLUSTERS, file);
const rank = (file) => {
  if (!isCluster(file)) return LONGEST.length + 1;
  const at = LONGEST.findIndex((name) => named([name], file));
  return at === -1 ? LONGEST.length : at;
};

const group = process.env.NETPLUG_TEST_GROUP;
if (group !== undefined && group !== 'clusters' && group !== 'others')
  throw new Error(`NETPLUG_TEST_GROUP is "${group}": clusters or others`);
const ALL = 'test/**/*.test.ts';
// Paths relative to the project (sortTestFiles gets them absolute: the tests above hold for both).
const all = globSync(ALL, { cwd: import.meta.dirname }).sort();
const files = { clusters: all.filter(isCluster), others: all.filter((file) => !isCluster(file)) };

export default {
  files: group ? files[group] : [ALL],
  extensions: ['ts'],
  workerThreads: false,
  timeout: '10m',
  concurrency: 2,
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b),
};
