// ava's settings (a file rather than package.json's "ava" field, for the order below).
//
// Test files run two at a time (ava's default on CI) in this order: the longest first, the files
// that start a real Kubernetes cluster (upgrades, installs) and the executable fuzzing, then the
// rest by name. Run by name, the upgrades came last, and the suite's last minutes ran one of them
// with the other slot idle.
const FIRST = ['test/upgrade/', 'test/e2e/', 'test/fuzz/executable'];
const rank = (file) => {
  const at = FIRST.findIndex((prefix) => file.includes(`/${prefix}`));
  return at === -1 ? FIRST.length : at;
};

export default {
  files: ['test/**/*.test.ts'],
  extensions: ['ts'],
  workerThreads: false,
  timeout: '10m',
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b),
};
