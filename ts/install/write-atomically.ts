// Files a reader may open at any moment (the kubelet's runtime reads the conf dir and runs the bin
// dir whenever it likes) are written whole or not at all: a temp file beside the target, fsync,
// rename over the target, fsync of the directory. The temp name starts with a dot and ends in
// `.tmp`, never `.conf`, `.conflist` or `.json`, so libcni never loads a half-written conflist.
import { constants } from 'node:fs';
import { open, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

let temps = 0;

/** A temp path beside `target`, unique in this process. */
export const tempPathFor = (target: string): string => join(dirname(target), `.${basename(target)}.${process.pid}.${temps++}.tmp`);

/** Writes `data` to `target` with `mode`, atomically and durably. */
export async function writeFileAtomically(target: string, data: string | Uint8Array, mode: number): Promise<void> {
  const temp = tempPathFor(target);
  try {
    const file = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
    try {
      await file.writeFile(data);
      // The umask may have narrowed the mode given to open.
      await file.chmod(mode);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temp, target);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  await syncDirectory(dirname(target));
}

/** Makes a rename or unlink in `dir` durable. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

const TEMP_NAME = /^\..+\.(\d+)\.\d+\.tmp$/;
/** Older than this, another process's temp file is left from a crash, not a write in progress. */
const STALE_AFTER_MS = 60_000;

/** Removes temp files a crashed install left in `dir` (they never match what libcni loads, but pile up). */
export async function removeStaleTemps(dir: string): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    const pid = TEMP_NAME.exec(name)?.[1];
    if (pid === undefined || Number(pid) === process.pid) continue;
    const info = await stat(join(dir, name)).catch(() => undefined);
    if (info && Date.now() - info.mtimeMs > STALE_AFTER_MS) await rm(join(dir, name), { force: true });
  }
}
