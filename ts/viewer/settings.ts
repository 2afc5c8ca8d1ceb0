// netplug-flow-viewer's settings, from its environment, parsed by one schema (runtime/settings.ts):
// a bad value stops the program with a line naming the variable and its value.
import * as z from 'zod/mini';

import { LOG_LEVEL } from '../runtime/log.ts';
import { hostPort, Invalid, parseEnv, SettingsError, setting, text } from '../runtime/settings.ts';

const VIEWER_PORT = 9449;
const VIEWER_HEALTH_PORT = 9450;
/** Where the kubelet mounts the projected token (ts/render/flow-viewer.ts). */
const TOKEN_FILE = '/var/run/secrets/netplug-flows/token';

/** An http:// or https:// URL without a query: netplug-flows' write port. */
const flowsUrl = setting((given) => {
  const url = URL.canParse(given) ? new URL(given) : undefined;
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '')
    throw new Invalid('must be an http:// or https:// URL such as http://netplug-flows.kube-system.svc:9445');
  return url.href.replace(/\/$/, '');
});

const schema = z.object({
  NETPLUG_VIEWER_LISTEN: hostPort(`127.0.0.1:${VIEWER_PORT}`),
  NETPLUG_VIEWER_HEALTH_ADDR: hostPort(`0.0.0.0:${VIEWER_HEALTH_PORT}`),
  NETPLUG_VIEWER_FLOWS_URL: flowsUrl,
  // The kubelet's variables for the Service netplug-flows in the pod's namespace.
  NETPLUG_FLOWS_SERVICE_HOST: text(),
  NETPLUG_FLOWS_SERVICE_PORT: text(),
  NETPLUG_VIEWER_TOKEN_FILE: setting((path) => path, TOKEN_FILE),
  LOG_LEVEL,
});

export interface ViewerSettings {
  /** Where the page and its API are served (the loopback by default: reached by port-forward). */
  listen: { host: string; port: number };
  health: { host: string; port: number };
  /** netplug-flows' write listener, where a reader's token reads records. */
  flowsUrl: string;
  /** A service account token for the audience netplug-flows, re-read when it changes. */
  tokenFile: string;
  logLevel: z.output<typeof schema>['LOG_LEVEL'];
}

export function viewerSettings(env: NodeJS.ProcessEnv): ViewerSettings {
  const given = parseEnv(schema, env);
  return {
    listen: given.NETPLUG_VIEWER_LISTEN,
    health: given.NETPLUG_VIEWER_HEALTH_ADDR,
    flowsUrl: given.NETPLUG_VIEWER_FLOWS_URL ?? serviceUrl(given.NETPLUG_FLOWS_SERVICE_HOST, given.NETPLUG_FLOWS_SERVICE_PORT),
    tokenFile: given.NETPLUG_VIEWER_TOKEN_FILE,
    logLevel: given.LOG_LEVEL,
  };
}

/** netplug-flows' Service as the kubelet names it to pods started after it. */
function serviceUrl(host: string | undefined, port: string | undefined): string {
  if (host === undefined || port === undefined)
    throw new SettingsError(
      'NETPLUG_VIEWER_FLOWS_URL is not set and there is no Service netplug-flows in this namespace (NETPLUG_FLOWS_SERVICE_HOST): set it, or apply netplug-flows.yaml and restart the viewer',
    );
  if (!/^\d+$/.test(port)) throw new SettingsError(`NETPLUG_FLOWS_SERVICE_PORT "${port}" is not a port number`);
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
