// A TCP relay on a port of the loopback to a test's server (the API server, etcd), which can be
// closed (dropping its connections and refusing new ones, as an unreachable server) and opened
// again on the same port.
import { connect, createServer, type Server, type Socket } from 'node:net';

import type { ExecutionContext } from 'ava';

/** A TCP relay on `port` to `target`, which can be closed (dropping its connections) and opened again on the same port. */
export function relay(t: ExecutionContext, port: number, target: number) {
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  const close = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      if (server) server.close(() => resolve());
      else resolve();
      server = undefined;
    });
  const open = () =>
    new Promise<void>((resolve, reject) => {
      server = createServer((client) => {
        const upstream = connect(target, '127.0.0.1');
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('close', () => sockets.delete(socket));
          socket.on('error', () => undefined);
        }
        client.pipe(upstream).pipe(client);
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
  t.teardown(close);
  return { open, close };
}
