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
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, linkSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { arch } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { parseArgs } from 'node:util';

import { NETPLUG_VERSION } from '../ts/version.ts';
import { readElfDynamic } from './lib/image-elf.ts';
import { writeImageArchive } from './lib/image-layout.ts';
import { imageArch, imageArchiveName, NETPLUG_IMAGE } from './lib/image-ref.ts';

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
/**
 * Debian's iptables (one multi-call executable, nftables backend), for netplug-node's natOutgoing
 * rules, with every extension it loads at run time (listing the nat table loads those of other
 * software's rules too): they are dlopen()ed from the directory compiled into libxtables.
 */
const IPTABLES = '/usr/sbin/xtables-nft-multi';
const IPTABLES_NAMES = ['iptables', 'iptables-restore', 'iptables-save'];
const XTABLES_DIR = join('/usr/lib', basename(dirname(libxtablesOf(IPTABLES))), 'xtables');

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
  // Every directory level's mode explicitly: mkdir's modes depend on the umask.
  const made = (path: string) => {
    mkdirSync(path, { recursive: true });
    for (let at = path; at.length >= dir.length; at = dirname(at)) chmodSync(at, 0o755);
  };
  const usrBin = join(dir, 'usr/bin');
  const cniBin = join(dir, 'opt/cni/bin');
  made(usrBin);
  made(cniBin);
  made(join(dir, 'tmp'));
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
  place(IPTABLES, join(usrBin, 'iptables'), 0o755);
  for (const name of IPTABLES_NAMES.slice(1)) linkSync(join(usrBin, 'iptables'), join(usrBin, name));
  const extensions = readdirSync(XTABLES_DIR)
    .filter((name) => name.endsWith('.so'))
    .sort()
    .map((name) => join(XTABLES_DIR, name));
  made(join(dir, XTABLES_DIR));
  for (const extension of extensions) place(extension, join(dir, extension), 0o644);

  // Every library any of them loads, where the image's loader finds it without a cache: ldd's
  // path (a Debian default search directory), under the soname the loader looks up.
  const elves = [SEA, SHIM, addon, ...SYSTEM_PLUGINS.map((name) => join('/usr/lib/cni', name)), IPTABLES, ...extensions];
  const libraries = new Map<string, string>(); // path in the image → file on this machine
  const interpreters = new Set<string>();
  for (const elf of elves) {
    const dynamic = readElfDynamic(elf);
    if (dynamic?.interpreter) interpreters.add(dynamic.interpreter);
    // A static executable loads nothing (and ldd refuses it).
    if (dynamic?.interpreter || dynamic?.needed.length)
      for (const [imagePath, hostPath] of loadedLibraries(elf)) libraries.set(imagePath, hostPath);
  }
  for (const interpreter of interpreters) libraries.set(interpreter, interpreter);
  for (const [imagePath, hostPath] of libraries) {
    const target = join(dir, imagePath);
    made(dirname(target));
    // Copied, not linked: the modes set here must not change the machine's own files.
    place(hostPath, target, interpreters.has(imagePath) ? 0o755 : 0o644);
  }
}

function place(from: string, to: string, mode: number): void {
  copyFileSync(from, to);
  chmodSync(to, mode);
}

/** Where libxtables is on this machine (its multiarch directory names the extensions' one). */
function libxtablesOf(elf: string): string {
  const found = [...loadedLibraries(elf).values()].find((path) => basename(path).startsWith('libxtables.so'));
  if (!found) throw new Error(`${elf} loads no libxtables: is Debian's iptables installed?`);
  return found;
}

/** ldd's answer for `elf`: image path (dir of the resolved file + soname) → host file. */
function loadedLibraries(elf: string): Map<string, string> {
  const found = new Map<string, string>();
  const output = execFileSync('ldd', [elf], { encoding: 'utf8' });
  for (const line of output.split('\n').map((text) => text.trim())) {
    if (!line || line.startsWith('linux-vdso') || line.startsWith('linux-gate')) continue;
    if (line.includes('not found')) throw new Error(`${elf}: ${line}`);
    const resolved = /^(\S+) => (\/\S+) \(/.exec(line);
    if (resolved) found.set(join(dirname(resolved[2] as string), resolved[1] as string), resolved[2] as string);
    // The loader itself (`/lib64/ld-linux-x86-64.so.2 (0x...)`): at its own path.
    else if (/^\/\S+ \(0x/.test(line)) found.set(line.split(' ')[0] as string, line.split(' ')[0] as string);
    else throw new Error(`${elf}: an ldd line not understood: ${line}`);
  }
  return found;
}
