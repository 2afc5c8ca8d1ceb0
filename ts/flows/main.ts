// netplug-flows, the flow-log aggregator (a Deployment): every node's netplug-node posts the flows
// its policy decided, per interval, as batches of FlowRecords (ts/model/flow.ts); netplug-flows
// keeps a bounded window of them in memory (window.ts: NETPLUG_FLOWS_RETENTION, NETPLUG_FLOWS_MAX_BYTES,
// the oldest dropped first) for `netplugctl flows` and other readers. Writes are authenticated
// with the writers' service account tokens (writers.ts: TokenReview with the program's own
// credentials, which need `create` on tokenreviews); reads are served on the loopback, reached by
// port-forward (server.ts), and on the write listener to the readers' tokens (NETPLUG_FLOWS_READERS:
// the flow viewer), checked alike. Serves /livez, /readyz and /metrics (the runtime's server) once both
// listeners are bound, and runs until `signal` aborts (exit 0); exit 1 when it cannot start.
import * as k8s from '@kubernetes/client-node';

import { describeError } from '../runtime/errors.ts';
import { isLoopback } from '../runtime/health-server.ts';
import { programLog } from '../runtime/log.ts';
import { Manager } from '../runtime/manager.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { FlowsMetrics } from './metrics.ts';
import { serveFlows, type FlowsServers } from './server.ts';
import { flowsSettings, type FlowsSettings } from './settings.ts';
import { FlowWindow } from './window.ts';
import { tokenReviewer, type Reviewer, Writers } from './writers.ts';

const PROGRAM = 'netplug-flows';
/** How often records past the retention are dropped when no batch arrives. */
const EXPIRE_INTERVAL_MS = 5000;

export interface FlowsOptions {
  /** Where log lines go (default: stderr). */
  writeLog?: (line: string) => void;
}

/** Runs netplug-flows until `signal` aborts; resolves to the exit code. */
export async function runFlowsMain(
  _argv: readonly string[],
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  options: FlowsOptions = {},
): Promise<number> {
  const write = options.writeLog ?? ((line: string) => process.stderr.write(line));
  let log = programLog(PROGRAM, write);
  let settings: FlowsSettings;
  let review: Reviewer;
  try {
    settings = flowsSettings(env);
    log = programLog(PROGRAM, write, settings.logLevel);
    const config = new k8s.KubeConfig();
    if (settings.kubeconfig) config.loadFromFile(settings.kubeconfig);
    else config.loadFromCluster();
    review = tokenReviewer(config);
  } catch (err) {
    log.error(`cannot start: ${describeError(err)}`);
    return 1;
  }

  const manager = new Manager({ log, health: settings.health });
  const metrics = new FlowsMetrics(manager.metrics.registry);
  const window = new FlowWindow({ retentionMs: settings.retentionMs, maxBytes: settings.maxBytes });
  const writers = new Writers({ review, writers: settings.writers });
  const readers = new Writers({ review, writers: settings.readers, role: 'read' });
  let servers: FlowsServers;
  try {
    servers = await serveFlows({ write: settings.write, read: settings.read, tls: settings.tls, window, writers, readers, metrics, log });
  } catch (err) {
    log.error(`cannot serve: ${describeError(err)}`);
    return 1;
  }
  const at = (address: { host: string; port: number }) => `${address.host}:${address.port}`;
  log.info(
    `${PROGRAM} ${NETPLUG_VERSION}: taking flow records on ${at(servers.write)} (${settings.tls ? 'TLS' : 'plain HTTP'}) from ${settings.writers.join(', ')}; serving reads on ${at(servers.read)}, and on ${at(servers.write)} to ${settings.readers.join(', ')}; keeping ${settings.retentionMs / 1000} s and at most ${settings.maxBytes} bytes of records`,
  );
  if (!isLoopback(settings.read.host) && settings.read.host !== 'localhost')
    log.warning(
      `reads are served beyond the loopback (${at(servers.read)}) without authentication: whoever reaches it reads every flow record`,
    );

  const expiry = setInterval(() => {
    metrics.dropped(window.expire(Date.now()));
    metrics.held(window.records, window.bytes);
  }, EXPIRE_INTERVAL_MS);
  metrics.held(0, 0);
  const code = await manager.run(signal);
  clearInterval(expiry);
  await servers.close();
  log.info('stopped');
  return code;
}
