// Which manifest an install came from (ts/upgrade/variant.ts), read from the release's own
// manifests: each one names itself, and an upgrade refuses a manifest of another kind, naming the
// file to give.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { readReleaseFile } from '../../ts/upgrade/release-files.ts';
import { manifestFileOf, variantMismatch, variantOfObjects, type Variant } from '../../ts/upgrade/variant.ts';
import { tempDir } from '../helpers/cni.ts';
import { previousManifest, releaseFile } from './tool-fixtures.ts';

const MANIFESTS = [
  'netplug.yaml',
  'netplug-etcd.yaml',
  'netplug-host-local.yaml',
  'netplug-flannel.yaml',
  'netplug-flannel-etcd.yaml',
  'netplug-policy-only.yaml',
];

const variantOfFile = (file: string): Variant => {
  const variant = variantOfObjects(readReleaseFile('--manifest', releaseFile(file)).objects);
  if (!variant) throw new Error(`${file} has no netplug-node DaemonSet`);
  return variant;
};

test('every manifest of the release is read as its own kind, and upgrades only its own kind', (t) => {
  for (const file of MANIFESTS) {
    const variant = variantOfFile(file);
    t.is(manifestFileOf(variant), file, JSON.stringify(variant));
    for (const other of MANIFESTS) {
      const mismatch = variantMismatch(variant, variantOfFile(other));
      if (other === file) t.is(mismatch, undefined);
      else t.true(mismatch?.includes(`give the release's ${file} with your edits`), `${file} installed, ${other} given: ${mismatch}`);
    }
  }
});

test('the refusal says what differs, and how to move between datastores', (t) => {
  t.is(
    variantMismatch(variantOfFile('netplug-etcd.yaml'), variantOfFile('netplug.yaml')),
    "the manifest given is of another kind than the install (the Kubernetes datastore, not the etcd datastore): give the release's netplug-etcd.yaml with your edits; moving between datastores is netplugctl datastore migrate",
  );
  t.is(
    variantMismatch(variantOfFile('netplug-flannel.yaml'), variantOfFile('netplug-host-local.yaml')),
    "the manifest given is of another kind than the install (netplug routing pods between nodes, not flannel routing pods between nodes): give the release's netplug-flannel.yaml with your edits",
  );
  t.is(variantOfObjects([{ kind: 'ConfigMap', metadata: { name: 'netplug-config' } }]), undefined, 'no DaemonSet: nothing to compare');
});

test("the previous release's manifests are read as the same kinds as this release's: each upgrades with its own file", (t) => {
  const dir = tempDir(t, 'previous-manifests');
  for (const file of ['netplug.yaml', 'netplug-etcd.yaml', 'netplug-host-local.yaml']) {
    const path = join(dir, file);
    writeFileSync(path, previousManifest(file));
    const previous = variantOfObjects(readReleaseFile('--manifest', path).objects);
    t.deepEqual(previous, variantOfFile(file), file);
  }
});
