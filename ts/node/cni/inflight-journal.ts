// ADDs netplug-node has started and not finished, on disk: `<socket dir>/inflight/<sha256 of
// containerId/ifname>.json` holding the command's environment and stdin. Written before an ADD
// starts, removed when it ends. If the agent dies in between (kill -9, OOM, node reboot), the ADD
// may have left an interface or an address behind and its shim reported failure, so at the next
// start the agent rolls each one back with a DEL of the same attachment, before it serves.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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

export class InflightJournal {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  /** Records the ADD; returns the entry's path, to remove when it ends. */
  record(entry: InflightEntry): string {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const name = createHash('sha256')
      .update(`${entry.env['CNI_CONTAINERID'] ?? ''}/${entry.env['CNI_IFNAME'] ?? ''}`)
      .digest('hex');
    const path = join(this.dir, `${name}.json`);
    const stored: Stored = { env: entry.env, stdin: entry.stdin.toString('base64'), program: entry.program, pid: entry.pid };
    // Written whole then renamed: a crash never leaves half an entry.
    const partial = `${path}.${process.pid}.partial`;
    writeFileSync(partial, JSON.stringify(stored), { mode: 0o600 });
    renameSync(partial, path);
    return path;
  }

  remove(path: string): void {
    rmSync(path, { force: true });
  }

  /** The entries a previous run left, with their paths; unreadable ones are removed (there is nothing to roll back with). */
  leftBehind(): { path: string; entry: InflightEntry }[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    const found: { path: string; entry: InflightEntry }[] = [];
    for (const name of names) {
      const path = join(this.dir, name);
      if (!name.endsWith('.json')) {
        rmSync(path, { force: true });
        continue;
      }
      try {
        const stored = JSON.parse(readFileSync(path, 'utf8')) as Stored;
        found.push({
          path,
          entry: { env: stored.env, stdin: Buffer.from(stored.stdin, 'base64'), program: stored.program, pid: stored.pid },
        });
      } catch {
        rmSync(path, { force: true });
      }
    }
    return found;
  }
}
