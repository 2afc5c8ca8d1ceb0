// Runs in a test's network namespace (conntrack.test.ts starts it under `ip netns exec`), as
// netplug-node runs in the node's: the calls of ts/dataplane/conntrack.ts, and the two ends of
// the TCP connections they are checked on. argv[2] is what to do:
//   enable                   enableConntrackAccounting(); prints {}
//   dump                     prints dumpConntrack()'s entries
//   serve <port> <count> <n> accepts <count> connections on every address; from each reads
//                            until the peer ends, then answers <n> bytes and ends; prints
//                            `listening` once listening
//   connect <host> <port> <n> sends <n> bytes, ends, reads the answer; prints { port, received }
// A failure prints { error: { name, code, op, message } } and exits 1.
import { connect, createServer } from 'node:net';

import { dumpConntrack, enableConntrackAccounting } from '../../ts/dataplane/conntrack.ts';

const [command, ...args] = process.argv.slice(2);

async function run(): Promise<unknown> {
  switch (command) {
    case 'enable':
      await enableConntrackAccounting();
      return {};
    case 'dump':
      return dumpConntrack();
    case 'serve': {
      const [port, count, answer] = args.map(Number) as [number, number, number];
      let left = count;
      const server = createServer({ allowHalfOpen: true }, (socket) => {
        socket.on('data', () => undefined);
        socket.on('end', () => socket.end(Buffer.alloc(answer, 'y')));
        socket.on('close', () => {
          if (--left === 0) server.close();
        });
      });
      await new Promise<void>((resolve) => server.listen({ port, host: '::' }, resolve));
      process.stdout.write('listening\n');
      await new Promise((resolve) => server.on('close', resolve));
      return undefined;
    }
    case 'connect': {
      const [host, port, size] = [args[0] as string, Number(args[1]), Number(args[2])];
      return new Promise((resolve, reject) => {
        let received = 0;
        let local: number | undefined;
        const socket = connect({ host, port }, () => {
          local = socket.localPort;
          socket.end(Buffer.alloc(size, 'x'));
        });
        socket.on('data', (chunk: Buffer) => {
          received += chunk.length;
        });
        socket.on('error', reject);
        socket.on('close', () => resolve({ port: local, received }));
      });
    }
    default:
      throw new Error(`unknown command ${command}`);
  }
}

try {
  const value = await run();
  if (value !== undefined) process.stdout.write(JSON.stringify(value));
} catch (err) {
  const { name, code, op, message } = err as Error & { code?: string; op?: string };
  process.stdout.write(JSON.stringify({ error: { name, code, op, message } }));
  process.exitCode = 1;
}
