// The plugin binaries: every file of the image's source dir into the host's CNI bin dir, by temp
// file + fsync + rename so a kubelet never runs a half-written file (the running old binary keeps
// its inode). Identical files are left alone, so a second run copies nothing. With the fast path
// (FAST_PATH, default true) the image's `netplug` is the shim and `netplug-oneshot` its fallback,
// installed first so that a shim never finds it missing; without it, the one-shot plugin is
// installed as `netplug` and the shim not at all.
//
// Reading is what an install costs: the one-shot plugin is 115 MB under two names. A source file
// is hashed once per inode (the image links its names), and a host file whose identity (inode,
// size, change time) is the one the last record gave is known to hold what was recorded: a second
// install of the same image reads no host file and each source once.
import { constants } from 'node:fs';
import { chmod, copyFile, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

import { sha256OfFile } from './hash-file.ts';
import type { Log } from '../runtime/log.ts';
import { fileIdentity, type InstalledFile } from './record.ts';
import { HOST_BIN_DIR, type InstallSettings } from './settings.ts';
import { syncDirectory, tempPathFor } from './write-atomically.ts';

export interface CopyOutcome {
  /** What this install put (or found identical) in the bin dir: the record's files. */
  installed: InstalledFile[];
  /** Names actually copied this time. */
  copied: string[];
  /** Every name the source dir ships (skipped ones included): never removed as stale. */
  shipped: Set<string>;
}

/** Copies the source dir's files; `previous` (the last record's files) keeps kept-as-is files listed. */
export async function copyBinaries(settings: InstallSettings, previous: InstalledFile[], log: Log): Promise<CopyOutcome> {
  const entries = await readdir(settings.sourceDir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    throw new Error(`cannot read the CNI source dir ${settings.sourceDir} (NETPLUG_CNI_SOURCE_DIR): ${err.code ?? err.message}`);
  });
  await mkdir(settings.binDir, { recursive: true });
  const outcome: CopyOutcome = { installed: [], copied: [], shipped: new Set() };
  const files = entries.filter((entry) => entry.isFile()).map((entry) => entry.name);
  const sourceHashes = new Map<string, string | undefined>();
  for (const { from, name } of binariesToInstall(files, settings.fastPath)) {
    outcome.shipped.add(name);
    const hostPath = `${HOST_BIN_DIR}/${name}`;
    if (settings.skipBinaries.has(name)) {
      log.info(`skipping ${hostPath}: listed in SKIP_CNI_BINARIES`);
      continue;
    }
    const source = join(settings.sourceDir, from);
    const target = join(settings.binDir, name);
    const targetStat = await stat(target).catch(() => undefined);
    if (targetStat && !settings.updateBinaries) {
      log.info(`keeping the existing ${hostPath}: UPDATE_CNI_BINARIES is false`);
      const ours = previous.find((file) => file.path === hostPath);
      if (ours) outcome.installed.push(ours);
      continue;
    }
    const sourceStat = await stat(source);
    const mode = sourceStat.mode & 0o7777;
    const sourceKey = `${sourceStat.dev}:${fileIdentity(sourceStat)}`;
    if (!sourceHashes.has(sourceKey)) sourceHashes.set(sourceKey, await sha256OfFile(source));
    const sha256 = sourceHashes.get(sourceKey);
    if (sha256 === undefined) throw new Error(`${source} disappeared while installing`);
    if (targetStat && targetStat.size === sourceStat.size && (await holds(target, targetStat, sha256, previous, hostPath))) {
      if ((targetStat.mode & 0o7777) !== mode) await chmod(target, mode);
    } else {
      await copyFileAtomically(source, target, mode);
      outcome.copied.push(name);
      log.info(`installed ${hostPath}${from === name ? '' : ` (the image's ${from}: FAST_PATH is false)`}`);
    }
    const installed = await stat(target).catch(() => undefined);
    outcome.installed.push(installed ? { path: hostPath, sha256, identity: fileIdentity(installed) } : { path: hostPath, sha256 });
  }
  if (outcome.copied.length > 0) await syncDirectory(settings.binDir);
  return outcome;
}

/** Whether the host file holds `sha256`: known from the last record while its identity is unchanged, read otherwise. */
async function holds(
  target: string,
  targetStat: { ino: number; size: number; ctimeMs: number },
  sha256: string,
  previous: InstalledFile[],
  hostPath: string,
): Promise<boolean> {
  const recorded = previous.find((file) => file.path === hostPath);
  if (recorded?.identity === fileIdentity(targetStat)) return recorded.sha256 === sha256;
  return (await sha256OfFile(target)) === sha256;
}

/** The image's shim and the one-shot plugin it falls back to. */
const SHIM = 'netplug';
const ONE_SHOT = 'netplug-oneshot';

/**
 * Which of the image's files (`from`) to install under which name, in order. An image without
 * netplug-oneshot ships the one-shot plugin as netplug: installed as it is, whatever FAST_PATH says.
 */
export function binariesToInstall(files: readonly string[], fastPath: boolean): { from: string; name: string }[] {
  const sorted = [...files].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (!sorted.includes(ONE_SHOT)) return sorted.map((name) => ({ from: name, name }));
  if (!fastPath) return sorted.filter((name) => name !== SHIM).map((name) => ({ from: name, name: name === ONE_SHOT ? SHIM : name }));
  // The fallback before the shim that runs it.
  const rank = (name: string) => (name === ONE_SHOT ? 0 : name === SHIM ? 2 : 1);
  return sorted.sort((a, b) => rank(a) - rank(b)).map((name) => ({ from: name, name }));
}

async function copyFileAtomically(source: string, target: string, mode: number): Promise<void> {
  const temp = tempPathFor(target);
  try {
    await copyFile(source, temp, constants.COPYFILE_EXCL);
    await chmod(temp, mode);
    const handle = await open(temp, constants.O_RDONLY);
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, target);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}
