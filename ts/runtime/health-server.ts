// One HTTP server per program for the kubelet's probes and Prometheus, in kube-apiserver's shape:
//   GET /livez, /readyz   200 `ok`, or 503 naming each failing check and its problem;
//                         `?verbose` lists every check, `[+]name ok` / `[-]name failed: problem`
//   GET /metrics          the program's registry (metrics.ts), in Prometheus' text format
// A probe reads the checks' known results (health.ts): it never waits on the datastore. What a
// check failed on (an endpoint, an address, the API server's words) is told only to a caller on
// the loopback; any other caller (the pod network reaches 0.0.0.0) gets the status code and a
// generic line. A server may serve /metrics alone (`serves: 'metrics'`): a second listener where
// Prometheus reaches it while the probes stay on the loopback. `aliases` answers older paths as
// the probe they name (`/readiness` as `/readyz`), for callers written against an earlier release.
//
// API: `serveHealth({ host, port }, { checks?, metrics?, serves?, aliases? })` resolves to a HealthServer
// (address, close()) once listening; `isLoopback(address)`.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import type { CheckKind, HealthChecks } from './health.ts';
import type { RuntimeMetrics } from './metrics.ts';

export interface HealthServer {
  /** Where it listens (the port chosen when 0 was asked). */
  readonly address: { host: string; port: number };
  close(): Promise<void>;
}

export interface Served {
  checks?: HealthChecks;
  metrics?: Pick<RuntimeMetrics, 'text' | 'contentType'>;
  /** `all` (default): probes and metrics; `metrics`: /metrics alone. */
  serves?: 'all' | 'metrics';
  /** Other paths answered as /livez or /readyz. */
  aliases?: Readonly<Record<string, '/livez' | '/readyz'>>;
}

/** 127.0.0.0/8, ::1, and IPv4 loopback addresses as a dual-stack socket reports them. */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  return v4.startsWith('127.') || address === '::1';
}

export async function serveHealth(address: { host: string; port: number }, served: Served): Promise<HealthServer> {
  const server = createServer((request, response) => {
    answer(request, response, served).catch(() => {
      if (!response.headersSent) reply(response, 500, 'internal error');
      else response.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  return {
    address: { host: address.host, port: bound.port },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function reply(response: ServerResponse, status: number, text: string, contentType = 'text/plain; charset=utf-8'): void {
  response.writeHead(status, { 'Content-Type': contentType, 'Cache-Control': 'no-store' });
  response.end(text);
}

async function answer(request: IncomingMessage, response: ServerResponse, served: Served): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://probe');
  if (request.method !== 'GET' && request.method !== 'HEAD') return reply(response, 405, 'only GET is served\n');
  if (url.pathname === '/metrics' && served.metrics) {
    return reply(response, 200, await served.metrics.text(), served.metrics.contentType);
  }
  const probes = served.serves !== 'metrics' && served.checks;
  const path = served.aliases?.[url.pathname] ?? url.pathname;
  if (probes && (path === '/livez' || path === '/readyz')) {
    const kind: CheckKind = path === '/livez' ? 'live' : 'ready';
    const results = probes.results(kind);
    const failed = results.filter((result) => result.problem !== undefined);
    const status = failed.length === 0 ? 200 : 503;
    const verdict = `${kind === 'live' ? 'livez' : 'readyz'} check ${failed.length === 0 ? 'passed' : 'failed'}`;
    if (!isLoopback(request.socket.remoteAddress)) return reply(response, status, failed.length === 0 ? 'ok\n' : `${verdict}\n`);
    const verbose = url.searchParams.has('verbose');
    if (failed.length === 0 && !verbose) return reply(response, 200, 'ok\n');
    const lines = (verbose ? results : failed).map(({ name, problem }) =>
      problem === undefined ? `[+]${name} ok` : `[-]${name} failed: ${problem}`,
    );
    return reply(response, status, `${lines.join('\n')}\n${verdict}\n`);
  }
  const paths =
    served.serves === 'metrics' || !served.checks ? ['/metrics'] : ['/livez', '/readyz', ...(served.metrics ? ['/metrics'] : [])];
  reply(response, 404, `not found: ${paths.join(', ')} ${paths.length > 1 ? 'are' : 'is'} served\n`);
}
