// netplugctl migrate auto-host-endpoints [--kubeconfig FILE] [datastore flags] [--timeout DUR]
// [--overwrite] [--dry-run]: the specification's "Migration to automatic host endpoints"
// (ts/migrate/auto-host-endpoints.ts). Nodes are always read and labelled through the Kubernetes
// API; host endpoints and the controllers' configuration live in the datastore. Exit 0 done (or
// nothing to do), 1 refused or failed with one line on stderr, 2 a usage mistake.
import { parseArgs } from 'node:util';

import * as k8s from '@kubernetes/client-node';

import { parseDuration } from '../config/duration.ts';
import type { ClusterCommand } from '../ctl/cluster-command.ts';
import { DATASTORE_FLAGS, datastoreSettings } from '../ctl/datastore.ts';
import { refuseOlderClient } from '../ctl/version.ts';
import { openStore } from '../store/open.ts';
import type { Store } from '../store/store.ts';
import { MigrationRefused, migrateAutoHostEndpoints } from './auto-host-endpoints.ts';

const COMMAND = 'netplugctl migrate auto-host-endpoints';
const DEFAULT_TIMEOUT = '5m';

const USAGE = `usage: ${COMMAND} [--kubeconfig FILE] [datastore flags] [--timeout DURATION] [--overwrite] [--dry-run]

Moves all-interfaces host endpoints (interfaceName "*") to the automatic ones netplug-kube-controllers
keeps per node (<node>-auto-hep, label projectnet.org/created-by=netplug-kube-controllers, profile
projectnet-default-allow: traffic is allowed wherever no policy applies):
  1. copies each all-interfaces host endpoint's labels onto its node (a label the node has with
     another value is a conflict: all are listed and nothing is changed, unless --overwrite);
  2. sets autoCreate: Enabled in KubeControllersConfiguration default (creating it if absent);
  3. waits until every node has its automatic host endpoint (at most --timeout, default ${DEFAULT_TIMEOUT});
  4. deletes the old all-interfaces host endpoints, each only if unchanged since step 1.
Each step says what it did; a second run says there is nothing to do.

  --kubeconfig FILE      the cluster (Nodes); with no --datastore-type, also the Kubernetes datastore.
                         Else KUBECONFIG, else ~/.kube/config, else the pod's service account
  --datastore-type etcdv3|kubernetes  --etcd-endpoints URLS  --etcd-discovery-srv DOMAIN
  --etcd-key-file FILE  --etcd-cert-file FILE  --etcd-ca-cert-file FILE  --config FILE
                         where the host endpoints are (as for netplugctl's other commands)
  --timeout DURATION     how long step 3 waits (such as 90s, 5m)
  --overwrite            give nodes the host endpoints' values where they conflict
  --dry-run              print what would be done; change nothing
  --allow-version-mismatch  write although this netplugctl is older than the cluster's netplug
`;

const OPTIONS = {
  ...DATASTORE_FLAGS,
  timeout: { type: 'string' },
  overwrite: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  'allow-version-mismatch': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const runAutoHostEndpointsCommand: ClusterCommand = async (args, env, io) => {
  let values: ReturnType<typeof parse>;
  try {
    values = parse(args);
  } catch (err) {
    io.err(`${COMMAND}: ${(err as Error).message}\n`);
    return 2;
  }
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  const config = new k8s.KubeConfig();
  let store: Store;
  try {
    const kubeconfig = values.kubeconfig ?? env['KUBECONFIG'];
    if (kubeconfig) config.loadFromFile(kubeconfig);
    else config.loadFromDefault();
    store = await openStore(datastoreSettings(values.flags, env));
  } catch (err) {
    io.err(`${COMMAND}: ${firstLine(err)}\n`);
    return 1;
  }
  try {
    if (!values.dryRun) await refuseOlderClient(store, values.allowMismatch);
    const migration = { store, core: config.makeApiClient(k8s.CoreV1Api), say: (line: string) => io.out(`${line}\n`), signal: io.signal };
    await migrateAutoHostEndpoints(migration, {
      overwrite: values.overwrite,
      dryRun: values.dryRun,
      timeoutMs: values.timeoutMs,
    });
    return 0;
  } catch (err) {
    io.err(`${COMMAND}: ${err instanceof MigrationRefused ? err.message : describeFailure(err, config)}\n`);
    return 1;
  } finally {
    store.close();
  }
};

function parse(args: readonly string[]) {
  let parsed: { values: Record<string, string | boolean | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    // node:util names the flag; its advice about "--" does not apply here.
    throw new Error(((err as Error).message.split('. To specify')[0] ?? 'bad arguments').replace(/^Unknown option/, 'unknown flag'));
  }
  const { values, positionals } = parsed;
  if (positionals.length > 0) throw new Error(`unexpected argument "${positionals[0]}"; see ${COMMAND} --help`);
  const timeout = (values['timeout'] as string | undefined) ?? DEFAULT_TIMEOUT;
  const timeoutMs = parseDuration(timeout);
  if (timeoutMs === undefined || timeoutMs <= 0) throw new Error(`--timeout "${timeout}" must be a duration such as 90s or 5m`);
  if (values['kubeconfig'] === '') throw new Error('--kubeconfig "" must name a file');
  return {
    flags: values,
    help: values['help'] === true,
    kubeconfig: values['kubeconfig'] as string | undefined,
    timeoutMs,
    overwrite: values['overwrite'] === true,
    dryRun: values['dry-run'] === true,
    allowMismatch: values['allow-version-mismatch'] === true,
  };
}

/** One line: the API server's message, or why it could not be reached. */
function describeFailure(err: unknown, config: k8s.KubeConfig): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  if (err instanceof TypeError && cause)
    return `cannot reach the API server ${config.getCurrentCluster()?.server}: ${cause.code ?? cause.message}`;
  const body = (err as { body?: unknown }).body;
  let message: string | undefined;
  try {
    message = typeof body === 'string' ? (JSON.parse(body) as { message?: string }).message : undefined;
  } catch {
    message = undefined;
  }
  return message ?? firstLine(err);
}

const firstLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? 'failed';
