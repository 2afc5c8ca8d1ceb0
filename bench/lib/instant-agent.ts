// A stand-in for netplug-node that answers the shim's protocol at once (accept, then a VERSION
// result), so that a benchmark times the shim alone. The protocol: frames of a 4-byte big-endian
// length and the bytes; request = env JSON frame + stdin frame; accept byte; go byte; reply =
// {"exitCode"} frame + stdout frame + stderr frame.
import { rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';

export interface InstantAgent {
  path: string;
  /** Resolves to process.hrtime.bigint() when the next request has fully arrived. */
  nextRequest(): Promise<bigint>;
  close(): Promise<void>;
}

const frame = (bytes: Buffer) => {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
};

const VERSION = Buffer.from('{"cniVersion":"1.1.0","supportedVersions":["1.1.0"]}\n');

export async function instantAgent(path: string): Promise<InstantAgent> {
  rmSync(path, { force: true });
  const waiting: ((at: bigint) => void)[] = [];
  const serve = (socket: Socket) => {
    let buffered = Buffer.alloc(0);
    let stage: 'request' | 'go' | 'done' = 'request';
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (stage === 'request') {
        // Two frames: the environment and stdin.
        if (buffered.length < 4) return;
        const first = 4 + buffered.readUInt32BE(0);
        if (buffered.length < first + 4) return;
        const second = first + 4 + buffered.readUInt32BE(first);
        if (buffered.length < second) return;
        waiting.shift()?.(process.hrtime.bigint());
        buffered = buffered.subarray(second);
        stage = 'go';
        socket.write(Buffer.from([1]));
      }
      if (stage === 'go' && buffered.length >= 1) {
        stage = 'done';
        socket.end(Buffer.concat([frame(Buffer.from('{"exitCode":0}')), frame(VERSION), frame(Buffer.alloc(0))]));
      }
    });
    socket.on('error', () => undefined);
  };
  const server = createServer(serve);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  return {
    path,
    nextRequest: () => new Promise((resolve) => waiting.push(resolve)),
    close: () =>
      new Promise((resolve) => {
        server.close(() => {
          rmSync(path, { force: true });
          resolve();
        });
      }),
  };
}
