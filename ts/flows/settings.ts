// netplug-flows' settings, from its environment, parsed by one schema (runtime/settings.ts): a bad
// value stops the program with a line naming the variable and its value.
import * as z from 'zod/mini';

import { LOG_LEVEL } from '../runtime/log.ts';
import { duration, hostPort, Invalid, parseEnv, SettingsError, setting, text } from '../runtime/settings.ts';

/** The audience a writer's token must be issued for (TokenRequest's `audiences`). */
export const FLOWS_AUDIENCE = 'netplug-flows';
const FLOWS_WRITE_PORT = 9445;
export const FLOWS_READ_PORT = 9446;
const FLOWS_HEALTH_PORT = 9447;

const UNITS: Record<string, number> = { '': 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, k: 1e3, M: 1e6, G: 1e9 };

/** A size in bytes: a number, or a quantity such as 64Mi, 512Ki or 100M; at least `min` bytes. */
const bytes = (fallback: string, min: number) =>
  setting((given) => {
    const match = /^(\d+)(Ki|Mi|Gi|k|M|G)?$/.exec(given);
    const value = match ? Number(match[1]) * (UNITS[match[2] ?? ''] as number) : Number.NaN;
    if (!Number.isSafeInteger(value) || value < min) throw new Invalid(`must be a size of at least ${min} bytes, such as 64Mi or 512Ki`);
    return value;
  }, fallback);

/** Service accounts as `namespace:name`, comma-separated: their API user names. */
const serviceAccounts = (fallback: string) =>
  setting((given) => {
    const items = given
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '');
    const bad = items.find((item) => !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?:[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(item));
    if (bad !== undefined || items.length === 0) throw new Invalid('must be service accounts as NAMESPACE:NAME, separated by commas');
    return items.map((item) => `system:serviceaccount:${item}`);
  }, fallback);

const schema = z.object({
  KUBECONFIG: text(),
  NETPLUG_FLOWS_LISTEN: hostPort(`:${FLOWS_WRITE_PORT}`),
  NETPLUG_FLOWS_READ_LISTEN: hostPort(`127.0.0.1:${FLOWS_READ_PORT}`),
  NETPLUG_FLOWS_HEALTH_ADDR: hostPort(`0.0.0.0:${FLOWS_HEALTH_PORT}`),
  NETPLUG_FLOWS_WRITERS: serviceAccounts('kube-system:netplug-node'),
  NETPLUG_FLOWS_READERS: serviceAccounts('kube-system:netplug-flow-viewer'),
  NETPLUG_FLOWS_RETENTION: duration('2h', { minMs: 1000 }),
  NETPLUG_FLOWS_MAX_BYTES: bytes('64Mi', 1024),
  NETPLUG_FLOWS_TLS_CERT_FILE: text(),
  NETPLUG_FLOWS_TLS_KEY_FILE: text(),
  LOG_LEVEL,
});

export interface FlowsSettings {
  /** The kubeconfig file; none: the pod's service account (in-cluster). */
  kubeconfig: string | undefined;
  /** Where nodes post their batches. */
  write: { host: string; port: number };
  /** Where records are read (the loopback by default: reached by port-forward). */
  read: { host: string; port: number };
  health: { host: string; port: number };
  /** The API user names of the service accounts that may write. */
  writers: readonly string[];
  /** The API user names of the service accounts that may read on the write listener (the flow viewer). */
  readers: readonly string[];
  retentionMs: number;
  maxBytes: number;
  /** Serve writes over TLS with this certificate and key. */
  tls: { cert: string; key: string } | undefined;
  logLevel: z.output<typeof schema>['LOG_LEVEL'];
}

export function flowsSettings(env: NodeJS.ProcessEnv): FlowsSettings {
  const given = parseEnv(schema, env);
  const cert = given.NETPLUG_FLOWS_TLS_CERT_FILE;
  const key = given.NETPLUG_FLOWS_TLS_KEY_FILE;
  if ((cert === undefined) !== (key === undefined))
    throw new SettingsError(
      `${cert === undefined ? 'NETPLUG_FLOWS_TLS_KEY_FILE' : 'NETPLUG_FLOWS_TLS_CERT_FILE'} is set without ${cert === undefined ? 'NETPLUG_FLOWS_TLS_CERT_FILE' : 'NETPLUG_FLOWS_TLS_KEY_FILE'}: give both, or neither`,
    );
  return {
    kubeconfig: given.KUBECONFIG,
    write: given.NETPLUG_FLOWS_LISTEN,
    read: given.NETPLUG_FLOWS_READ_LISTEN,
    health: given.NETPLUG_FLOWS_HEALTH_ADDR,
    writers: given.NETPLUG_FLOWS_WRITERS,
    readers: given.NETPLUG_FLOWS_READERS,
    retentionMs: given.NETPLUG_FLOWS_RETENTION,
    maxBytes: given.NETPLUG_FLOWS_MAX_BYTES,
    tls: cert !== undefined && key !== undefined ? { cert, key } : undefined,
    logLevel: given.LOG_LEVEL,
  };
}
