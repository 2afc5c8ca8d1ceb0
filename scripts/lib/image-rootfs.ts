// Staging an image's root file system from this machine's files, shared by netplug's image
// (scripts/build-image.ts) and flanneld's (scripts/build-flannel-image.ts): directories and files
// with explicit modes (the layer records them as they are), Debian's iptables, and exactly the
// shared libraries a set of executables loads.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, linkSync, mkdirSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

import { readElfDynamic } from './image-elf.ts';

/** Makes `path` under `root` with every directory level 0755: mkdir's modes depend on the umask. */
export function makeDir(root: string, path: string): void {
  mkdirSync(path, { recursive: true });
  for (let at = path; at.length >= root.length; at = dirname(at)) chmodSync(at, 0o755);
}

/** Copies, not links: the modes set here must not change the machine's own files. */
export function place(from: string, to: string, mode: number): void {
  copyFileSync(from, to);
  chmodSync(to, mode);
}

/**
 * Debian's iptables (one multi-call executable, nftables backend) as /usr/bin/{iptables,
 * iptables-restore,iptables-save}, with every extension it loads at run time (listing a table
 * loads those of other software's rules too): they are dlopen()ed from the directory compiled into
 * libxtables. Returns the ELF files placed, whose libraries the image needs too.
 */
export function placeIptables(root: string): string[] {
  const iptables = '/usr/sbin/xtables-nft-multi';
  const usrBin = join(root, 'usr/bin');
  makeDir(root, usrBin);
  place(iptables, join(usrBin, 'iptables'), 0o755);
  for (const name of ['iptables-restore', 'iptables-save']) linkSync(join(usrBin, 'iptables'), join(usrBin, name));
  const xtablesDir = join('/usr/lib', basename(dirname(libxtablesOf(iptables))), 'xtables');
  const extensions = readdirSync(xtablesDir)
    .filter((name) => name.endsWith('.so'))
    .sort()
    .map((name) => join(xtablesDir, name));
  makeDir(root, join(root, xtablesDir));
  for (const extension of extensions) place(extension, join(root, extension), 0o644);
  return [iptables, ...extensions];
}

/**
 * Every library any of `elves` loads, where the image's loader finds it without a cache: ldd's
 * path (a Debian default search directory), under the soname the loader looks up; and the loader
 * at its PT_INTERP path.
 */
export function placeLibraries(root: string, elves: string[]): void {
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
    const target = join(root, imagePath);
    makeDir(root, dirname(target));
    place(hostPath, target, interpreters.has(imagePath) ? 0o755 : 0o644);
  }
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
