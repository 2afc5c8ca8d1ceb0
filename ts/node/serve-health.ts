// /liveness and /readiness for the kubelet's httpGet probes: alive while the process answers;
// ready once start-up work is done and while the datastore answers (checked periodically, so a
// probe never waits on the datastore).
import { createServer, type Server } from 'node:http';

export interface Health {
  /** Why the agent is not ready, or undefined when it is. */
  notReady(): string | undefined;
}

export async function serveHealth(host: string, port: number, health: Health): Promise<Server> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    const reply = (status: number, text: string) => {
      response.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
      response.end(`${text}\n`);
    };
    if (path === '/liveness') return reply(200, 'live');
    if (path === '/readiness') {
      const reason = health.notReady();
      return reason === undefined ? reply(200, 'ready') : reply(503, `not ready: ${reason}`);
    }
    reply(404, 'not found: /liveness and /readiness are served');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
