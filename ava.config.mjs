// ava's settings (a file rather than package.json's "ava" field, for the groups below).
//
// `npm test` runs the test files in two groups (scripts/test-ts.ts), one after the other:
// - clusters: the files that start real Kubernetes clusters (upgrades, installs) and the
//   executable fuzzing, two at a time, the longest first. A third cluster beside two starved the
//   machine's two cores (load above 60): each file took several times as long.
// - others: the rest (namespaces, etcd, a kube-apiserver), three at a time by name. Two at a time
//   left a core idle while tests waited on the kernel, etcd or the API server: 18 minutes then,
//   16 at three.
// Without NETPLUG_TEST_GROUP (`npx ava <file>`), every file, two at a time, clusters first.
const CLUSTERS = ['test/upgrade/', 'test/e2e/', 'test/fuzz/executable'];
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
const isCluster = (file) => CLUSTERS.some((prefix) => file.includes(`/${prefix}`));
const rank = (file) => {
  if (!isCluster(file)) return LONGEST.length + 1;
  const at = LONGEST.findIndex((name) => file.endsWith(`/test/${name}.test.ts`));
  return at === -1 ? LONGEST.length : at;
};

const group = process.env.NETPLUG_TEST_GROUP;
if (group !== undefined && group !== 'clusters' && group !== 'others')
  throw new Error(`NETPLUG_TEST_GROUP is "${group}": clusters or others`);
const ALL = 'test/**/*.test.ts';
const files = {
  clusters: CLUSTERS.map((prefix) => (prefix.endsWith('/') ? `${prefix}**/*.test.ts` : `${prefix}.test.ts`)),
  others: [ALL, ...CLUSTERS.map((prefix) => `!${prefix.endsWith('/') ? `${prefix}**/*.test.ts` : `${prefix}.test.ts`}`)],
};

export default {
  files: group ? files[group] : [ALL],
  extensions: ['ts'],
  workerThreads: false,
  timeout: '10m',
  concurrency: group === 'others' ? 3 : 2,
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b),
};
