// The record of what this installer put on the host, kept outside the conf dir
// (<root>/var/lib/netplug/cni-installed.json): a later version removes the binaries it no longer
// ships, the readiness check and `netplugctl upgrade status` read the installed version, and the
// uninstall removes exactly these files.
import { mkdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';

import { NETPLUG_VERSION } from '../version.ts';
import { sha256OfFile } from './hash-file.ts';
import type { Log } from '../runtime/log.ts';
import { HOST_BIN_DIR, HOST_CONF_DIR, type InstallSettings } from './settings.ts';
import { writeFileAtomically } from './write-atomically.ts';

export interface InstalledFile {
  /** As the host sees it, e.g. /opt/cni/bin/netplug. */
  path: string;
  sha256: string;
  /**
   * The host file's inode, size and change time as installed (fileIdentity): while they are the
   * same, its content is still `sha256` and a later install need not read it again.
   */
  identity?: string;
}

/** What a file's change would alter: its inode (replaced), size, or change time (written, which no tool can set back). */
export const fileIdentity = (stat: { ino: number; size: number; ctimeMs: number }): string => `${stat.ino}:${stat.size}:${stat.ctimeMs}`;

export interface InstallRecord {
  version: string;
  binDir: string;
  confDir: string;
  files: InstalledFile[];
}

/** The record, or undefined when there is none or it is unreadable (as if nothing were installed). */
export async function readRecord(path: string): Promise<InstallRecord | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const record = JSON.parse(text) as InstallRecord;
    if (typeof record.version !== 'string' || !Array.isArray(record.files)) return undefined;
    record.files = record.files
      .filter((file) => typeof file?.path === 'string' && isBinDirFile(file.path) && typeof file.sha256 === 'string')
      .map(({ path, sha256, identity }) => (typeof identity === 'string' ? { path, sha256, identity } : { path, sha256 }));
    return record;
  } catch {
    return undefined;
  }
}

/** Only a plain file name directly in the bin dir: a damaged record never points elsewhere. */
const isBinDirFile = (path: string): boolean => {
  const name = path.slice(HOST_BIN_DIR.length + 1);
  return path.startsWith(`${HOST_BIN_DIR}/`) && name !== '' && name !== '.' && name !== '..' && !name.includes('/');
};

export async function writeRecord(path: string, files: InstalledFile[]): Promise<void> {
  const record: InstallRecord = { version: NETPLUG_VERSION, binDir: HOST_BIN_DIR, confDir: HOST_CONF_DIR, files };
  await mkdir(dirname(path), { recursive: true });
  await writeFileAtomically(path, `${JSON.stringify(record, null, 2)}\n`, 0o644);
}

/**
 * Removes recorded files, except those whose name is in `keep`. A file whose content is no longer
 * what was recorded belongs to someone else now (another installer replaced it) and stays.
 */
export async function removeRecordedFiles(settings: InstallSettings, files: InstalledFile[], keep: Set<string>, log: Log): Promise<void> {
  for (const file of files) {
    const name = file.path.slice(HOST_BIN_DIR.length + 1);
    if (keep.has(name)) continue;
    const target = join(settings.binDir, name);
    const sha256 = await sha256OfFile(target);
    if (sha256 === undefined) continue;
    if (sha256 !== file.sha256) {
      log.warning(`leaving ${file.path}: its content changed since netplug installed it`);
      continue;
    }
    await rm(target, { force: true });
    log.info(`removed ${file.path}`);
  }
}
