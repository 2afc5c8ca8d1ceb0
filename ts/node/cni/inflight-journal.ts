// ADDs netplug-node has started and not finished, on disk: `<socket dir>/inflight/<sha256 of
// containerId/ifname>.json` holding the command's environment and stdin. Written before an ADD
// starts, removed when it ends. If the agent dies in between (kill -9, OOM, node reboot), the ADD
// may have left an interface or an address behind and its shim reported failure, so at the next
// start the agent rolls each one back with a DEL of the same attachment, before it serves.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
    const name = createHash('sha256')
      .update(`${entry.env['CNI_CONTAINERID'] ?? ''}/${entry.env['CNI_IFNAME'] ?? ''}`)
      .digest('hex');
    const path = join(this.dir, `${name}.json`);
    const stored: Stored = { env: entry.env, stdin: entry.stdin.toString('base64'), program: entry.program, pid: entry.pid };
    // Written in place, not to a temporary name then renamed (a system call and a directory
    // update less on every ADD): the entry is written before the ADD does anything, so an agent
    // that dies mid-write leaves half an entry for an ADD that did nothing, which leftBehind()
    // discards as unreadable.
    const text = JSON.stringify(stored);
    try {
      writeFileSync(path, text, { mode: 0o600 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      // No directory yet (the first ADD), or it was removed while the agent ran: made.
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      writeFileSync(path, text, { mode: 0o600 });
    }
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
