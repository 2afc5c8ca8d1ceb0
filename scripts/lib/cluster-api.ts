// Waiting on the test cluster: polls with a deadline that fail with the daemons' log tails, GETs
// to the API server as a client certificate's user, and the test process's way to the API server.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { connect, createServer, type Server } from 'node:net';

import { sleep, type Daemon } from './cluster-processes.ts';

/** Polls `ready` (every 100 ms, up to 60 s); fails with the logs' tails when a daemon died or time ran out. */
export async function waitFor(what: string, daemons: Daemon[], ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const dead = daemons.find((daemon) => daemon.exited());
    if (dead) throw new Error(`${dead.name} exited while waiting for ${what}:\n${dead.tail()}`);
    if (await ready().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}:\n${daemons.map((daemon) => `--- ${daemon.name}\n${daemon.tail()}`).join('\n')}`);
}

export function apiGet(
  server: string,
  ca: string,
  user: { cert: string; key: string },
  path: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${server}${path}`,
      { ca: readFileSync(ca), cert: readFileSync(user.cert), key: readFileSync(user.key), timeout: 2000 },
      (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

/**
 * A loopback TCP port here piping each connection to `socket` (served inside the node's network
 * namespace by cluster-forward.ts): the test process reaches the API server through it.
 */
export async function listenRelay(socket: string): Promise<{ server: Server; url: string }> {
  const server = createServer((client) => {
    const upstream = connect(socket);
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  const address = server.address();
  return { server, url: `https://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}` };
}
