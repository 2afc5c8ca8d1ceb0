// An append-only log file shared by many short-lived plugin processes, rotated by size and pruned
// by age and count. Written here because no npm library enforces size, age and count together, and
// none coordinates processes that append to and rotate one file at the same time
// (rotating-file-stream, pino-roll and winston's rotators keep their state in one process).
//
// How it stays correct across processes:
// - every record is one write(2) on an O_APPEND descriptor, so records never interleave;
// - rotation renames the file aside under a lock directory (mkdir is atomic), re-checking the size
//   under the lock so that two processes never rotate the same full file twice;
// - a process whose file was renamed away reopens the path on its next record.
//
// It never blocks the plugin: the file is opened O_NONBLOCK (opening a FIFO without a reader would
// otherwise wait forever) and must be a regular file (a FIFO, a device or a socket is refused and
// the logger carries on with stderr). Rotated files past their age are pruned when a process first
// opens the log, and hourly while one keeps it open (netplug-node serving commands), too: a node
// whose log never fills up still sheds old files.
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmdirSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';

export interface RotationLimits {
  /** Rotate when the file reaches this many bytes. */
  maxBytes: number;
  /** Delete rotated files older than this. */
  maxAgeDays: number;
  /** Keep at most this many rotated files. */
  maxCount: number;
}

/** A lock older than this belongs to a process that died mid-rotation. */
const STALE_LOCK_MS = 30_000;
/** How long a writer waits for another process's rotation before writing anyway. */
const ROTATION_WAIT_MS = 200;
const DAY_MS = 86_400_000;
/** How often a process that keeps the log open prunes old rotations again. */
const PRUNE_INTERVAL_MS = 3_600_000;

export class RotatingFile {
  readonly path: string;
  private readonly limits: RotationLimits;
  private fd: number | undefined;
  private inode = 0;
  /** When old rotations were last pruned (0: not yet). */
  private prunedAt = 0;

  constructor(path: string, limits: RotationLimits) {
    this.path = path;
    this.limits = limits;
  }

  /** Appends one record (a line, with its newline) in a single write, rotating first if the
   * file has reached its size limit. */
  write(record: string): void {
    // One look at the path per record (open() checks it was not renamed away), unless it rotates.
    let fd = this.open();
    if (fstatSync(fd).size >= this.limits.maxBytes) {
      this.rotate();
      fd = this.open();
    } else if (Date.now() - this.prunedAt >= PRUNE_INTERVAL_MS) this.pruneQuietly();
    writeSync(fd, Buffer.from(record));
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private open(): number {
    // Reopen when another process renamed our file away.
    if (this.fd !== undefined && this.currentInode() !== this.inode) this.close();
    if (this.fd === undefined) {
      ensureDirectory(dirname(this.path));
      this.fd = openLog(this.path);
      this.inode = fstatSync(this.fd).ino;
      if (this.prunedAt === 0) this.pruneQuietly();
    }
    return this.fd;
  }

  private currentInode(): number {
    try {
      return statSync(this.path).ino;
    } catch {
      return -1;
    }
  }

  private rotate(): void {
    const lock = `${this.path}.rotating`;
    if (!acquire(lock)) {
      // Another process is rotating: let it finish rather than keep filling the full file.
      waitWhileExists(lock, ROTATION_WAIT_MS);
      return;
    }
    try {
      // Under the lock, look at the file at the path, which may already be a fresh one.
      let size: number;
      try {
        size = statSync(this.path).size;
      } catch {
        return;
      }
      if (size < this.limits.maxBytes) return;
      renameSync(this.path, this.rotatedName());
      this.prune();
    } finally {
      rmdirSync(lock);
      this.close();
    }
  }

  /** `cni-2026-11-21T08-00-34.534Z.log` beside `cni.log`. */
  private rotatedName(): string {
    const ext = extname(this.path);
    const stem = join(dirname(this.path), basename(this.path, ext));
    const stamp = new Date().toISOString().replaceAll(':', '-');
    for (let n = 0; ; n++) {
      const candidate = `${stem}-${stamp}${n ? `.${n}` : ''}${ext}`;
      try {
        statSync(candidate);
      } catch {
        return candidate;
      }
    }
  }

  private pruneQuietly(): void {
    this.prunedAt = Date.now();
    try {
      this.prune();
    } catch {
      // an unreadable directory keeps its old files; the record still goes in
    }
  }

  private prune(): void {
    const directory = dirname(this.path);
    const ext = extname(this.path);
    const prefix = `${basename(this.path, ext)}-`;
    const rotated = readdirSync(directory)
      .filter((name) => name.startsWith(prefix) && name.endsWith(ext) && name !== basename(this.path))
      .map((name) => {
        const path = join(directory, name);
        try {
          return { path, mtime: statSync(path).mtimeMs };
        } catch {
          return undefined;
        }
      })
      .filter((file) => file !== undefined)
      .sort((a, b) => b.mtime - a.mtime);
    const oldest = Date.now() - this.limits.maxAgeDays * DAY_MS;
    rotated.forEach((file, index) => {
      if (index >= this.limits.maxCount || file.mtime < oldest) {
        try {
          unlinkSync(file.path);
        } catch {
          // already pruned by another process
        }
      }
    });
  }
}

const OPEN_FLAGS = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NONBLOCK | constants.O_NOCTTY;

/** An append descriptor on the regular file at `path`; anything else is refused before or after opening. */
function openLog(path: string): number {
  let existing: ReturnType<typeof statSync> | undefined;
  try {
    existing = statSync(path);
  } catch {
    // not there yet: created below
  }
  // Not even opened: opening a device can have effects of its own.
  if (existing && !existing.isFile()) throw notRegular(path);
  const fd = openSync(path, OPEN_FLAGS, 0o644);
  // Whatever took the path between the stat and the open.
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw notRegular(path);
  }
  return fd;
}

function notRegular(path: string): Error {
  return new Error(`${path} is not a regular file; logging to stderr only`);
}

/** Takes the lock directory; breaks a stale one left by a process that died holding it. */
function acquire(lock: string): boolean {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      mkdirSync(lock);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      try {
        if (Date.now() - statSync(lock).mtimeMs < STALE_LOCK_MS) return false;
        rmdirSync(lock);
      } catch {
        // released meanwhile: try again
      }
    }
  }
  return false;
}

/** Sleeps in 1 ms steps while `path` exists, up to `limitMs`. */
function waitWhileExists(path: string, limitMs: number): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let waited = 0; waited < limitMs && existsSync(path); waited++) Atomics.wait(pause, 0, 0, 1);
}

/**
 * Creates `dir` and its missing parents, one mkdir each. Not `mkdirSync(dir, { recursive })`:
 * where a file system refuses with ENOENT under an existing parent (procfs does), Node's
 * recursive mkdir retries forever, and a plugin must never hang on a bad log path.
 */
function ensureDirectory(dir: string): void {
  const missing: string[] = [];
  for (let current = dir; !existsSync(current); current = dirname(current)) {
    missing.push(current);
    if (dirname(current) === current) break;
  }
  for (const path of missing.reverse()) {
    try {
      mkdirSync(path, 0o755);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}
