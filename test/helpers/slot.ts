// A number no other running test process holds, for what must not clash between test files
// running at once (their host routes and links share the root network namespace). A pid modulo
// the range clashed: two workers of one run got the same /16 and one's pod route refused the
// other's (EEXIST). Claimed by creating a file exclusively; a file left by a process that is gone
// is taken over; the file is removed when this process exits.
import { mkdirSync, openSync, readFileSync, rmSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const DIR = join(tmpdir(), 'netplug-test-slots');
const SLOTS = 64;

let claimed: number | undefined;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function held(path: string): boolean {
  try {
    const holder = Number(readFileSync(path, 'utf8'));
    return !(holder > 0) || alive(holder);
  } catch {
    return false;
  }
}

function tryClaim(path: string): boolean {
  try {
    const fd = openSync(path, 'wx');
    writeSync(fd, String(process.pid));
    closeSync(fd);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return false;
  }
}

/** This process's slot, 0 to 63: the same on every call, never one another running process holds. */
export function processSlot(): number {
  if (claimed !== undefined) return claimed;
  mkdirSync(DIR, { recursive: true });
  const first = process.pid % SLOTS;
  for (let pass = 0; pass < 2; pass++) {
    for (let i = 0; i < SLOTS; i++) {
      const slot = (first + i) % SLOTS;
      const path = join(DIR, String(slot));
      // The second pass, when no slot is free, takes over the files of processes that are gone
      // (a worker killed). An empty file is one being written: held.
      if (pass === 1 && !held(path)) rmSync(path, { force: true });
      if (tryClaim(path)) {
        claimed = slot;
        process.once('exit', () => rmSync(path, { force: true }));
        return slot;
      }
    }
  }
  throw new Error(`all ${SLOTS} test slots under ${DIR} are held by running processes`);
}
