// npm run build:image: the OCI image archive of netplug, dist/images/netplug-<version>-<arch>.oci.tar,
// for `ctr -n k8s.io images import`; prints its reference last. No registry, no base image: one
// layer holding the executables `npm run build` wrote (prebuild:image runs it), Debian's
// reference plugins install-cni copies beside ours, exactly the shared libraries they load, and
// /tmp. No shell. Reproducible: the same inputs give the same digests (image-layout.ts).
//
//   /usr/bin/{netplug-node,netplug-install,netplug-kube-controllers,netplug-operator,netplug-flows,
//            netplug-flow-viewer,netplugctl}                                      the SEA, hard links
//   /opt/cni/bin/{netplug-oneshot,netplug-ipam}                                   the same file
//   /opt/cni/bin/netplug                                                          the native shim (static)
//   /usr/bin/ and /opt/cni/bin/netplug-dataplane.linux-<arch>-gnu.node            the addon, beside each
//   /opt/cni/bin/{portmap,host-local,loopback,tuning}                             from /usr/lib/cni
//   /usr/bin/{iptables,iptables-restore,iptables-save}, /usr/lib/<triplet>/xtables/   Debian's iptables (nft), natOutgoing's rules
//   /lib/<triplet>/<soname>, the loader at its PT_INTERP path (/lib64/... on x86-64)
//
// Usage: node scripts/build-image.ts [--out <dir>] (default dist/images).
import { chmodSync, existsSync, linkSync, rmSync, statSync } from 'node:fs';
import { arch } from 'node:os';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';

import { NETPLUG_VERSION } from '../ts/version.ts';
import { writeImageArchive } from './lib/image-layout.ts';
import { imageArch, imageArchiveName, NETPLUG_IMAGE } from './lib/image-ref.ts';
import { makeDir, place, placeIptables, placeLibraries } from './lib/image-rootfs.ts';

const root = new URL('../', import.meta.url).pathname;
const { values } = parseArgs({ options: { out: { type: 'string', default: join(root, 'dist/images') } } });
const outDir = values.out;

const ADDON = `netplug-dataplane.linux-${arch()}-gnu.node`;
const SEA = join(root, 'dist/cni/netplug-oneshot');
const SHIM = join(root, 'dist/cni/netplug');
const USR_BIN = [
  'netplug-node',
  'netplug-install',
  'netplug-kube-controllers',
  'netplug-operator',
  'netplug-flows',
  'netplug-flow-viewer',
  'netplugctl',
];
const CNI_BIN = ['netplug-oneshot', 'netplug-ipam'];
/** Debian's reference plugins (containernetworking-plugins) that the conflist chains or install-cni ships. */
const SYSTEM_PLUGINS = ['portmap', 'host-local', 'loopback', 'tuning'];

// Scratch space on the file system of dist/ whatever --out says, so the SEA is hard-linked in:
// tar then stores it once and its other names as links.
const work = join(root, 'dist/images', `.work-${process.pid}`);
const rootfs = join(work, 'rootfs');
for (const file of [SEA, SHIM])
  if (!existsSync(file)) throw new Error(`${file} is missing: npm run build writes it (npm run build:image runs it first)`);
try {
  stageRootfs(rootfs);
  const image = await writeImageArchive(rootfs, join(outDir, imageArchiveName()), join(work, 'layout'), {
    reference: NETPLUG_IMAGE,
    architecture: imageArch(),
    config: {
      Env: ['PATH=/usr/bin:/opt/cni/bin'],
      // No Entrypoint: a pod's `command` is the whole command line; by default the node agent.
      Cmd: ['/usr/bin/netplug-node'],
      Labels: {
        'org.opencontainers.image.title': 'netplug',
        'org.opencontainers.image.version': NETPLUG_VERSION,
        'org.opencontainers.image.licenses': 'Apache-2.0',
        'org.opencontainers.image.description':
          'netplug: the node agent, install-cni, kube-controllers, the operator, the flow-log aggregator and viewer, netplugctl and the CNI plugins',
      },
    },
  });
  const megabytes = (statSync(image.archive).size / 1e6).toFixed(0);
  console.log(`wrote ${relative(process.cwd(), image.archive)} (${megabytes} MB, manifest ${image.manifest.digest})`);
  console.log(NETPLUG_IMAGE);
} finally {
  rmSync(work, { recursive: true, force: true });
}

/** Lays out the image's files under `dir` with explicit modes (the layer records them as they are). */
function stageRootfs(dir: string): void {
  const usrBin = join(dir, 'usr/bin');
  const cniBin = join(dir, 'opt/cni/bin');
  makeDir(dir, usrBin);
  makeDir(dir, cniBin);
  makeDir(dir, join(dir, 'tmp'));
  chmodSync(join(dir, 'tmp'), 0o1777);
  // Hard links of dist's files: one copy in the layer (tar stores the others as links).
  const addon = join(root, 'dist/cni', ADDON);
  for (const name of USR_BIN) linkSync(SEA, join(usrBin, name));
  for (const name of CNI_BIN) linkSync(SEA, join(cniBin, name));
  linkSync(SHIM, join(cniBin, 'netplug'));
  linkSync(addon, join(usrBin, ADDON));
  linkSync(addon, join(cniBin, ADDON));
  // The layer records modes as they are (build.ts makes these three 0755 already).
  chmodSync(SEA, 0o755);
  chmodSync(SHIM, 0o755);
  chmodSync(addon, 0o755);
  for (const name of SYSTEM_PLUGINS) place(join('/usr/lib/cni', name), join(cniBin, name), 0o755);
  // natOutgoing's rules.
  const iptables = placeIptables(dir);
  placeLibraries(dir, [SEA, SHIM, addon, ...SYSTEM_PLUGINS.map((name) => join('/usr/lib/cni', name)), ...iptables]);
}
