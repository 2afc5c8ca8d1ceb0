// Waiting on the test cluster: polls with a deadline that fail with the daemons' log tails, and
// GETs to the API server as a client certificate's user.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';

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
