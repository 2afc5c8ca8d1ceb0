// /liveness and /readiness for the kubelet's httpGet probes, /metrics for Prometheus. Alive while
// the process answers; ready while none of the agent's sources (start-up work, the datastore,
// routes, ...) has a reason not to be, each checked periodically by its owner so that a probe
// never waits on the datastore. A second listener (NETPLUG_METRICS_ADDR) may serve /metrics alone
// on an address Prometheus reaches, while the probes stay on the loopback.
import { createServer, type Server } from 'node:http';

/** Why one part of the agent is not ready, or undefined when it is. */
export type NotReady = () => string | undefined;

export interface Health {
  /** Every source of unreadiness; the agent is ready when none gives a reason. */
  notReady: NotReady | readonly NotReady[];
  /** Served at /metrics when given. */
  metrics?: { text(): Promise<string>; readonly contentType: string };
}

/** The reasons the agent is not ready, in the order of the sources; empty when it is ready. */
export function notReadyReasons(health: Pick<Health, 'notReady'>): string[] {
  const sources = typeof health.notReady === 'function' ? [health.notReady] : health.notReady;
  return sources.map((source) => source()).filter((reason): reason is string => reason !== undefined && reason !== '');
}

export type Served = 'health' | 'metrics';

/** Serves the probes and /metrics (`health`), or /metrics alone (`metrics`), on host:port. */
export async function serveHealth(host: string, port: number, health: Health, serves: Served = 'health'): Promise<Server> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    const reply = (status: number, text: string) => {
      response.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
      response.end(`${text}\n`);
    };
    if (path === '/metrics' && health.metrics) {
      const metrics = health.metrics;
      metrics.text().then(
        (text) => {
          response.writeHead(200, { 'Content-Type': metrics.contentType });
          response.end(text);
        },
        (err: Error) => reply(500, `cannot collect the metrics: ${err.message}`),
      );
      return;
    }
    if (serves === 'metrics') return reply(404, 'not found: /metrics is served');
    if (path === '/liveness') return reply(200, 'live');
    if (path === '/readiness') {
      const reasons = notReadyReasons(health);
      return reasons.length === 0 ? reply(200, 'ready') : reply(503, `not ready: ${reasons.join('; ')}`);
    }
    reply(404, `not found: ${health.metrics ? '/liveness, /readiness and /metrics are' : '/liveness and /readiness are'} served`);
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
