// The previous release the upgrade tests install (scripts/previous-release.sh): built from its tagged
// commit, with its own image, netplugctl, manifests and chart, which differ from this release's
// where v3.30.0 differs on purpose.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { loadAllYaml } from '@kubernetes/client-node';
import test from 'ava';

import { PREVIOUS_RELEASE, previousRelease, previousReleaseCommit } from '../../scripts/lib/previous-release.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const release = previousRelease();
const run = (file: string, ...args: string[]) => execFileSync(file, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const nodePod = (file: string) =>
  (loadAllYaml(readFileSync(file, 'utf8')) as any[]).find((doc) => doc.kind === 'DaemonSet' && doc.metadata.name === 'netplug-node').spec
    .template.spec;

test('the recorded commit is an ancestor of this release, and the tag names it where the clone has tags', (t) => {
  const commit = previousReleaseCommit();
  t.is(commit, PREVIOUS_RELEASE.commit);
  // A clone made without tags (CI's) still has the commit: main records it as a merge parent.
  const tagged = run('git', '-C', ROOT, 'tag', '--list', PREVIOUS_RELEASE.tag).trim();
  if (tagged) t.is(run('git', '-C', ROOT, 'rev-parse', `${PREVIOUS_RELEASE.tag}^{commit}`).trim(), commit);
  t.notThrows(() => run('git', '-C', ROOT, 'merge-base', '--is-ancestor', commit, 'HEAD'));
  t.is(release.version, 'v3.30.0');
  t.true(release.root.endsWith(`/netplug/release-v3.30.0-${commit}`));
  t.not(NETPLUG_VERSION, release.version);
});

test('a clone without the commit (shallow, or without tags and history) gets an error saying so, not a build of something else', (t) => {
  const empty = mkdtempSync(join(tmpdir(), 'nptest-previous-release-'));
  t.teardown(() => rmSync(empty, { recursive: true, force: true }));
  run('git', 'init', '-q', empty);
  t.throws(() => previousReleaseCommit(empty), {
    message: new RegExp(`previous release v3\\.30\\.0 \\(commit ${PREVIOUS_RELEASE.commit}\\) is not in .*git fetch --unshallow --tags`),
  });
});

test('its netplugctl says 3.30.0', (t) => {
  t.is(run(release.netplugctl, 'version', '--client'), 'Client Version:    v3.30.0\n');
});

test('its image is localhost/netplug:v3.30.0', (t) => {
  t.is(release.image, 'localhost/netplug:v3.30.0');
  const index = JSON.parse(run('tar', '-xOf', release.imageArchive, 'index.json'));
  t.deepEqual(
    index.manifests.map((manifest: any) => manifest.annotations['io.containerd.image.name']),
    ['localhost/netplug:v3.30.0'],
  );
});

test('its chart is netplug-operator 3.30.0 in a repository index', (t) => {
  const chart = run('tar', '-xzOf', release.chart, 'netplug-operator/Chart.yaml');
  t.regex(chart, /^version: 3\.30\.0$/m);
  t.regex(chart, /^appVersion: v3\.30\.0$/m);
  t.regex(readFileSync(join(release.chartIndexDir, 'index.yaml'), 'utf8'), /netplug-operator-3\.30\.0\.tgz/);
});

test('its manifests differ as designed: upgrade-ipam, the legacy env var and volume, a host-local variant', (t) => {
  for (const file of ['netplug.yaml', 'netplug-etcd.yaml', 'netplug-host-local.yaml']) {
    const pod = nodePod(join(release.manifests, file));
    t.deepEqual(
      pod.initContainers.map((container: any) => container.name),
      ['upgrade-ipam'],
      file,
    );
    t.is(pod.initContainers[0].image, 'localhost/netplug:v3.30.0');
    t.true(
      pod.containers[0].env.some((variable: any) => variable.name === 'NETPLUG_LEGACY_STATUS_FILE'),
      file,
    );
    t.true(
      pod.volumes.some((volume: any) => volume.name === 'legacy-status'),
      file,
    );
  }
  const hostLocal = (loadAllYaml(readFileSync(join(release.manifests, 'netplug-host-local.yaml'), 'utf8')) as any[]).find(
    (doc) => doc.kind === 'ConfigMap',
  );
  t.regex(hostLocal.data.cni_network_config, /"ipam": \{"type": "host-local", "subnet": "usePodCidr"\}/);
  // This release has none of them.
  for (const file of ['netplug.yaml', 'netplug-etcd.yaml']) {
    const pod = nodePod(join(ROOT, 'deploy/manifests', file));
    t.falsy(
      pod.initContainers?.some((container: any) => container.name === 'upgrade-ipam'),
      file,
    );
    t.false(
      pod.containers[0].env.some((variable: any) => variable.name === 'NETPLUG_LEGACY_STATUS_FILE'),
      file,
    );
  }
});

test('its README installs with kubectl create -f', (t) => {
  const readme = readFileSync(join(release.root, 'README.md'), 'utf8');
  t.regex(readme, /^kubectl create -f deploy\/manifests\/netplug\.yaml$/m);
  t.regex(readme, /^kubectl create -f deploy\/manifests\/netplug-operator\.yaml$/m);
});
