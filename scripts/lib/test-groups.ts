// The two groups of test files npm test runs at once (scripts/test-ts.ts), and the order of the
// cluster files; ava.config.mjs takes its file lists from here too.
// - clusters: the files that start real Kubernetes clusters (upgrades, installs) and the
//   executable fuzzing, the longest first, so that the group does not end with one long file
//   running alone.
// - others: the rest (namespaces, etcd, a kube-apiserver), by name.
import { globSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '../..');
const CLUSTERS = ['test/upgrade/', 'test/e2e/', 'test/fuzz/executable'];
// Files under those folders that start no cluster (a kube-apiserver, an etcd at most): the others'.
const NOT_CLUSTERS = [
  'upgrade/allow-all-upgrade-plan',
  'upgrade/overrun-report',
  'upgrade/previous-release',
  'upgrade/tool-apply',
  'upgrade/tool-plan',
  'upgrade/variant',
  'upgrade/version-records',
];
// The cluster files by their time in a full run, longest first; files not named here come after them.
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
const named = (names: readonly string[], file: string): boolean => names.some((name) => file.endsWith(`test/${name}.test.ts`));
const isCluster = (file: string): boolean => CLUSTERS.some((prefix) => file.includes(prefix)) && !named(NOT_CLUSTERS, file);
const rank = (file: string): number => {
  if (!isCluster(file)) return LONGEST.length + 1;
  const at = LONGEST.findIndex((name) => named([name], file));
  return at === -1 ? LONGEST.length : at;
};
/** ava's sortTestFiles: the cluster files longest first, then the rest by name. */
export const byRank = (a: string, b: string): number => rank(a) - rank(b) || a.localeCompare(b);

export const ALL = 'test/**/*.test.ts';
// Paths relative to the project (ava gives sortTestFiles absolute ones: the tests above hold for both).
const all = globSync(ALL, { cwd: ROOT }).sort();
export const groups: Record<'clusters' | 'others', string[]> = {
  clusters: all.filter(isCluster).sort(byRank),
  others: all.filter((file) => !isCluster(file)),
};
