// npm run build:image:flannel: the OCI image archive of flanneld for the flannel install variant
// (deploy/manifests/netplug-flannel.yaml), dist/images/netplug-flannel-<flannel version>-<arch>.oci.tar,
// for `ctr -n k8s.io images import`; prints its reference last. As netplug's image
// (build-image.ts): no registry, no base image, no shell, one reproducible layer:
//
//   /usr/bin/flanneld                                              built from the Go module proxy (scripts/flannel.sh), static
//   /usr/bin/{iptables,iptables-restore,iptables-save}, xtables/   Debian's iptables (nft), flannel's forward and masquerade rules
//   /lib/<triplet>/<soname>, the loader                             what iptables loads
//
// Usage: node scripts/build-flannel-image.ts [--out <dir>] (default dist/images).
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';

import { FLANNEL_IMAGE, FLANNEL_VERSION } from '../ts/render/flannel.ts';
import { writeImageArchive } from './lib/image-layout.ts';
import { flannelImageArchiveName, imageArch } from './lib/image-ref.ts';
import { makeDir, place, placeIptables, placeLibraries } from './lib/image-rootfs.ts';

const root = new URL('../', import.meta.url).pathname;
const { values } = parseArgs({ options: { out: { type: 'string', default: join(root, 'dist/images') } } });

// The manifests name the image by the version ts/render/flannel.ts gives; the binary is the one go.mod pins.
const pinned = /^require github\.com\/flannel-io\/flannel (v\S+)$/m.exec(readFileSync(join(root, 'scripts/flannel/go.mod'), 'utf8'))?.[1];
if (pinned !== FLANNEL_VERSION)
  throw new Error(
    `scripts/flannel/go.mod pins flannel ${pinned ?? '(nothing)'}, ts/render/flannel.ts names ${FLANNEL_VERSION}: make them one release`,
  );
const flanneld = execFileSync('sh', [join(root, 'scripts/flannel.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();

const work = join(values.out, `.work-flannel-${process.pid}`);
const rootfs = join(work, 'rootfs');
try {
  makeDir(rootfs, join(rootfs, 'usr/bin'));
  place(flanneld, join(rootfs, 'usr/bin/flanneld'), 0o755);
  placeLibraries(rootfs, [flanneld, ...placeIptables(rootfs)]);
  const image = await writeImageArchive(rootfs, join(values.out, flannelImageArchiveName()), join(work, 'layout'), {
    reference: FLANNEL_IMAGE,
    architecture: imageArch(),
    config: {
      Env: ['PATH=/usr/bin'],
      Cmd: ['/usr/bin/flanneld'],
      Labels: {
        'org.opencontainers.image.title': 'netplug-flannel',
        'org.opencontainers.image.version': FLANNEL_VERSION,
        'org.opencontainers.image.licenses': 'Apache-2.0',
        'org.opencontainers.image.description': "flannel's flanneld with iptables, for netplug's flannel install variant",
      },
    },
  });
  const megabytes = (statSync(image.archive).size / 1e6).toFixed(0);
  console.log(`wrote ${relative(process.cwd(), image.archive)} (${megabytes} MB, manifest ${image.manifest.digest})`);
  console.log(FLANNEL_IMAGE);
} finally {
  rmSync(work, { recursive: true, force: true });
}
