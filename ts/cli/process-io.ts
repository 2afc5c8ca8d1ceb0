// The process-facing edge: stdin, stderr and the program's name. Only ts/cli touches `process`.
import { readSync, writeSync } from 'node:fs';
import { basename } from 'node:path';

import type { MainIo } from '../plugin/main.ts';

/** All of stdin. A runtime's pipe may be non-blocking, so EAGAIN waits briefly and reads on. */
function readStdin(): Buffer {
  const chunks: Buffer[] = [];
  const buffer = Buffer.allocUnsafe(64 * 1024);
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    let n: number;
    try {
      n = readSync(0, buffer, 0, buffer.length, null);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN') {
        Atomics.wait(pause, 0, 0, 2);
        continue;
      }
      if (code === 'EOF') break;
      throw err;
    }
    if (n === 0) break;
    chunks.push(Buffer.from(buffer.subarray(0, n)));
  }
  return Buffer.concat(chunks);
}

/**
 * Writes all of `text` to a file descriptor. Straight write(2) calls rather than process.stdout
 * and process.stderr: those are stream objects whose set-up a one-shot plugin need not pay for.
 */
export function writeAll(fd: 1 | 2, text: string): void {
  const data = Buffer.from(text);
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let offset = 0; offset < data.length; ) {
    try {
      offset += writeSync(fd, data, offset);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      Atomics.wait(pause, 0, 0, 1);
    }
  }
}

export function processIo(): MainIo {
  return {
    env: process.env,
    readStdin,
    stderr: (text) => writeAll(2, text),
    pid: process.pid,
  };
}

/** The one-shot plugin's file name beside the shim `netplug`; run by that name, it is `netplug`. */
const ONESHOT_NAME = 'netplug-oneshot';

/**
 * The name this program was run as: the runtime executes `netplug` (the shim, which runs this
 * executable as `netplug-oneshot` with argv[0] unchanged when netplug-node does not serve) or
 * `netplug-ipam`, an admin `netplugctl`. Run directly as `netplug-oneshot` it is `netplug` too,
 * in its output and logs alike. Under plain `node`, the script's name counts.
 */
export function programName(): string {
  const invoked = basename(process.argv0);
  const name = (invoked === 'node' || invoked.startsWith('node.') ? basename(process.argv[1] ?? '') : invoked).replace(
    /\.(c|m)?[jt]s$/,
    '',
  );
  return name === ONESHOT_NAME ? 'netplug' : name;
}
