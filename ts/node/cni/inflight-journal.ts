// ADDs netplug-node has started and not finished, on disk, holding each command's environment and
// stdin. Recorded before an ADD starts, cleared when it ends. If the agent dies in between (kill -9,
// OOM), the ADD may have left an interface or an address behind and its shim reported failure, so
// at the next start the agent rolls each one back with a DEL of the same attachment, before it
// serves.
//
// An entry goes in a slot: a file `<dir>/slot-<n>` the agent keeps open and writes in place (a
// 4-byte length, then the entry's JSON; length 0 is a free slot). Creating a file per ADD cost
// ~0.3 ms on ext4 while etcd syncs its log on the same disk (the file system's journal makes a
// create wait for the commit in progress); a write to an open file costs microseconds. A slot
// is written in one write(2), which a dying process does not cut short. Entries that a
// previous release wrote, one file `<sha256 of containerId/ifname>.json` each, are read and
// removed the same way.
import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { basename, join } from 'node:path';

export interface InflightEntry {
  env: Record<string, string>;
  stdin: Buffer;
  program: 'netplug' | 'netplug-ipam';
  pid: number;
}

interface Stored {
  env: Record<string, string>;
  stdin: string;
  program: 'netplug' | 'netplug-ipam';
  pid: number;
}

const SLOT = /^slot-\d+$/;
const FREE = Buffer.alloc(4);

export class InflightJournal {
  readonly dir: string;
  /** Open slots, by path. */
  readonly #open = new Map<string, number>();
  /** Open slots holding no entry. */
  #free: string[] = [];
  #next = 0;

  constructor(dir: string) {
    this.dir = dir;
  }

  /** Records the ADD; returns where, to remove when it ends. */
  record(entry: InflightEntry): string {
    const stored: Stored = { env: entry.env, stdin: entry.stdin.toString('base64'), program: entry.program, pid: entry.pid };
    const json = Buffer.from(JSON.stringify(stored));
    const bytes = Buffer.allocUnsafe(4 + json.length);
    bytes.writeUInt32BE(json.length, 0);
    json.copy(bytes, 4);
    const path = this.#slot();
    try {
      writeSync(this.#open.get(path) as number, bytes, 0, bytes.length, 0);
    } catch (err) {
      this.#drop(path);
      throw err;
    }
    return path;
  }

  /** Clears the entry at `path` (a slot is kept for the next ADD). Never throws: an entry left is rolled back at the next start. */
  remove(path: string): void {
    if (!SLOT.test(basename(path))) {
      rmSync(path, { force: true });
      return;
    }
    let fd = this.#open.get(path);
    try {
      if (fd === undefined) {
        fd = openSync(path, 'r+');
        this.#open.set(path, fd);
      }
      writeSync(fd, FREE, 0, FREE.length, 0);
      this.#free.push(path);
    } catch {
      this.#drop(path);
      try {
        rmSync(path, { force: true });
      } catch {
        // Left for the next start, which rolls it back.
      }
    }
  }

  /**
   * The entries a previous run left, with where they are; unreadable ones, and free slots this
   * journal does not hold, are removed (there is nothing to roll back with).
   */
  leftBehind(): { path: string; entry: InflightEntry }[] {
    const found: { path: string; entry: InflightEntry }[] = [];
    for (const { path, entry } of this.#read()) {
      if (entry) found.push({ path, entry });
      else if (!this.#open.has(path)) rmSync(path, { force: true });
    }
    return found;
  }

  /** The entries there now, changing nothing. */
  entries(): { path: string; entry: InflightEntry }[] {
    return this.#read().flatMap(({ path, entry }) => (entry ? [{ path, entry }] : []));
  }

  /** Closes the slots (their entries stay). */
  close(): void {
    for (const path of [...this.#open.keys()]) this.#drop(path);
  }

  #read(): { path: string; entry: InflightEntry | undefined }[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    return names.sort().map((name) => {
      const path = join(this.dir, name);
      return { path, entry: SLOT.test(name) ? slotEntry(path) : name.endsWith('.json') ? fileEntry(path) : undefined };
    });
  }

  /** A free open slot: one cleared before, else a new file. */
  #slot(): string {
    for (let path = this.#free.pop(); path !== undefined; path = this.#free.pop()) {
      // Its file removed meanwhile (the directory with it): an entry there would be lost.
      const fd = this.#open.get(path);
      if (fd !== undefined && fstatSync(fd).nlink > 0) return path;
      this.#drop(path);
    }
    for (;;) {
      const path = join(this.dir, `slot-${this.#next++}`);
      try {
        this.#open.set(path, openSync(path, 'wx', 0o600));
        return path;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // A previous run's slot, which the start-up's roll-back has not removed (in use, or kept).
        if (code === 'EEXIST') continue;
        if (code !== 'ENOENT') throw err;
        // No directory yet (the first ADD), or it was removed while the agent ran: made.
        mkdirSync(this.dir, { recursive: true, mode: 0o700 });
        this.#next--;
      }
    }
  }

  #drop(path: string): void {
    const fd = this.#open.get(path);
    this.#open.delete(path);
    this.#free = this.#free.filter((free) => free !== path);
    if (fd !== undefined) closeSync(fd);
  }
}

/** A slot's entry; undefined when it is free or unreadable. */
function slotEntry(path: string): InflightEntry | undefined {
  try {
    const bytes = readFileSync(path);
    if (bytes.length < 4) return undefined;
    const length = bytes.readUInt32BE(0);
    if (length === 0 || 4 + length > bytes.length) return undefined;
    return decode(bytes.subarray(4, 4 + length).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** An entry a previous release wrote, a file of its own. */
function fileEntry(path: string): InflightEntry | undefined {
  try {
    return decode(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

function decode(text: string): InflightEntry | undefined {
  try {
    const stored = JSON.parse(text) as Stored;
    if (typeof stored.env !== 'object' || typeof stored.stdin !== 'string') return undefined;
    return { env: stored.env, stdin: Buffer.from(stored.stdin, 'base64'), program: stored.program, pid: stored.pid };
  } catch {
    return undefined;
  }
}
