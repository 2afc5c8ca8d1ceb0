// The plugin binaries: every file of the image's source dir into the host's CNI bin dir, by temp
// file + fsync + rename so a kubelet never runs a half-written file (the running old binary keeps
// its inode). Identical files are left alone, so a second run copies nothing.
import { constants } from 'node:fs';
import { chmod, copyFile, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

import { sha256OfFile } from './hash-file.ts';
import type { Log } from './log.ts';
import type { InstalledFile } from './record.ts';
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
  for (const entry of entries.filter((entry) => entry.isFile()).sort((a, b) => a.name.localeCompare(b.name))) {
    outcome.shipped.add(entry.name);
    const hostPath = `${HOST_BIN_DIR}/${entry.name}`;
    if (settings.skipBinaries.has(entry.name)) {
      log('INFO', `skipping ${hostPath}: listed in SKIP_CNI_BINARIES`);
      continue;
    }
    const source = join(settings.sourceDir, entry.name);
    const target = join(settings.binDir, entry.name);
    const targetStat = await stat(target).catch(() => undefined);
    if (targetStat && !settings.updateBinaries) {
      log('INFO', `keeping the existing ${hostPath}: UPDATE_CNI_BINARIES is false`);
      const ours = previous.find((file) => file.path === hostPath);
      if (ours) outcome.installed.push(ours);
      continue;
    }
    const sourceStat = await stat(source);
    const mode = sourceStat.mode & 0o7777;
    const sha256 = await sha256OfFile(source);
    if (sha256 === undefined) throw new Error(`${source} disappeared while installing`);
    if (targetStat && targetStat.size === sourceStat.size && (await sha256OfFile(target)) === sha256) {
      if ((targetStat.mode & 0o7777) !== mode) await chmod(target, mode);
    } else {
      await copyFileAtomically(source, target, mode);
      outcome.copied.push(entry.name);
      log('INFO', `installed ${hostPath}`);
    }
    outcome.installed.push({ path: hostPath, sha256 });
  }
  if (outcome.copied.length > 0) await syncDirectory(settings.binDir);
  return outcome;
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
