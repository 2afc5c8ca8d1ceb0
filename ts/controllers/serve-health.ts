// /liveness and /readiness. Live while the process serves; ready only when the datastore and the
// API server answer now and every enabled controller has completed a pass.
import { createServer, type Server } from 'node:http';

export interface HealthChecks {
  /** What keeps the controllers from being ready; empty when ready. */
  problems(): Promise<string[]>;
}

export async function serveHealth(address: { host: string; port: number }, checks: HealthChecks): Promise<Server> {
  const server = createServer((request, response) => {
    const path = request.url?.split('?')[0];
    const answer = (status: number, text: string) => {
      response.writeHead(status, { 'content-type': 'text/plain' });
      response.end(`${text}\n`);
    };
    if (path === '/liveness') answer(200, 'live');
    else if (path === '/readiness')
      checks.problems().then(
        (problems) => (problems.length === 0 ? answer(200, 'ready') : answer(503, problems.join('; '))),
        (err: unknown) => answer(503, err instanceof Error ? err.message : String(err)),
      );
    else answer(404, 'not found: /liveness or /readiness');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/** `check` within `ms`, or a problem saying it did not answer. */
export async function answersWithin(what: string, ms: number, check: () => Promise<unknown>): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve(`${what} did not answer within ${ms / 1000} s`), ms);
  });
  try {
    return await Promise.race([
      check().then(
        () => undefined,
        (err: unknown) => `${what} is unreachable: ${err instanceof Error ? err.message : String(err)}`,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
