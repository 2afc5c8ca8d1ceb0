// netplug-flow-viewer (a Deployment): a web page of the flows netplug-flows holds, live, with
// filters, the policy and rule that allowed or denied each, and a graph of namespaces and pods
// with allowed and denied edges. It serves the page and a small API (server.ts) on
// NETPLUG_VIEWER_LISTEN, the loopback by default, reached by `kubectl port-forward`; the API reads
// netplug-flows' write listener as a reader (proxy.ts), with the projected service account token
// of NETPLUG_VIEWER_TOKEN_FILE (token-file.ts). Serves /livez, /readyz and /metrics (the runtime's
// server), and runs until `signal` aborts (exit 0); exit 1 when it cannot start.
import { describeError } from '../runtime/errors.ts';
import { isLoopback } from '../runtime/health-server.ts';
import { programLog } from '../runtime/log.ts';
import { Manager } from '../runtime/manager.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { serveViewer, type ViewerServer } from './server.ts';
import { type ViewerSettings, viewerSettings } from './settings.ts';
import { TokenFile } from './token-file.ts';

const PROGRAM = 'netplug-flow-viewer';

export interface ViewerOptions {
  /** Where log lines go (default: stderr). */
  writeLog?: (line: string) => void;
}

/** Runs netplug-flow-viewer until `signal` aborts; resolves to the exit code. */
export async function runViewerMain(
  _argv: readonly string[],
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  options: ViewerOptions = {},
): Promise<number> {
  const write = options.writeLog ?? ((line: string) => process.stderr.write(line));
  let log = programLog(PROGRAM, write);
  let settings: ViewerSettings;
  try {
    settings = viewerSettings(env);
    log = programLog(PROGRAM, write, settings.logLevel);
  } catch (err) {
    log.error(`cannot start: ${describeError(err)}`);
    return 1;
  }
  const token = new TokenFile(settings.tokenFile);
  // Not fatal: the kubelet may not have written the projected token yet; each request reads it again.
  try {
    token.current();
  } catch (err) {
    log.warning(`${describeError(err)}: the page will say so until it can be read`);
  }

  const manager = new Manager({ log, health: settings.health });
  let server: ViewerServer;
  try {
    server = await serveViewer({ listen: settings.listen, source: { url: settings.flowsUrl, token, log }, log });
  } catch (err) {
    log.error(`cannot serve: ${describeError(err)}`);
    return 1;
  }
  log.info(
    `${PROGRAM} ${NETPLUG_VERSION}: serving the flow viewer on http://${server.address.host}:${server.address.port}/, reading netplug-flows at ${settings.flowsUrl} with the token of ${settings.tokenFile}`,
  );
  if (!isLoopback(server.address.host) && server.address.host !== 'localhost')
    log.warning(
      `the viewer is served beyond the loopback (${server.address.host}:${server.address.port}) without authentication: whoever reaches it reads every flow record`,
    );
  const code = await manager.run(signal);
  await server.close();
  log.info('stopped');
  return code;
}
