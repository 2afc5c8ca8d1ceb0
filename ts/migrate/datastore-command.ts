// `netplugctl datastore migrate lock|unlock|export|import`: move netplug's data from etcd to the
// Kubernetes datastore, as the reference's calicoctl datastore migrate does. The datastore is
// chosen with netplugctl's usual flags (ts/ctl/datastore.ts): the source (etcd) for lock and
// export, the target (--kubeconfig) for import and unlock.
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';

import type { ClusterCommand, ClusterCommandIo } from '../ctl/cluster-command.ts';
import { DATASTORE_FLAGS, datastoreSettings } from '../ctl/datastore.ts';
import { UsageError } from '../ctl/usage.ts';
import { refuseOlderClient } from '../ctl/version.ts';
import { KubeStore } from '../store/kubernetes/store.ts';
import { openStore } from '../store/open.ts';
import type { Store } from '../store/store.ts';
import { formatExport, parseExport } from './datastore-document.ts';
import { describeSections, exportDatastore } from './datastore-export.ts';
import { importDatastore } from './datastore-import.ts';
import { lockDatastore, unlockDatastore } from './datastore-lock.ts';

const USAGE = `usage: netplugctl datastore migrate <lock|unlock|export|import> [flags] [datastore flags]

Moves netplug's data from etcd to the Kubernetes datastore:
  lock      on etcd: ClusterInformation "default" datastoreReady=false; ADD is refused (code 11)
            until unlock, DEL goes on
  export    on etcd: [-f FILE] [-o json|yaml] [--allow-unlocked] pools, blocks, handles, block
            affinities, nodes, workload endpoints, pending requests and ClusterInformation, in one
            document (stdout without -f); refused unless locked
  import    on the Kubernetes datastore (--kubeconfig FILE): -f FILE, written locked; refused when
            the target holds other netplug IPAM data; run it again after an interruption
  unlock    on the Kubernetes datastore once the nodes use it: datastoreReady=true

Steps: lock (etcd), export, import (Kubernetes), switch the nodes to datastore_type kubernetes,
unlock (Kubernetes). The etcd datastore stays locked.

datastore flags: --datastore-type etcdv3|kubernetes --etcd-endpoints URLS --etcd-discovery-srv DOMAIN
  --etcd-key-file FILE --etcd-cert-file FILE --etcd-ca-cert-file FILE --kubeconfig FILE
  --k8s-api-root URL --config FILE --allow-version-mismatch
`;

const FLAGS = {
  ...DATASTORE_FLAGS,
  'allow-version-mismatch': { type: 'boolean' },
  file: { type: 'string', short: 'f' },
  output: { type: 'string', short: 'o' },
  'allow-unlocked': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

type Flags = ReturnType<typeof parse>['values'];

/** The flags each subcommand takes besides the datastore's. */
const OWN_FLAGS: Record<string, readonly string[]> = {
  lock: [],
  unlock: [],
  export: ['file', 'output', 'allow-unlocked'],
  import: ['file'],
};

const DATASTORE_FLAG_NAMES = [...Object.keys(DATASTORE_FLAGS), 'allow-version-mismatch'];

function parse(args: readonly string[]) {
  try {
    return parseArgs({ args: [...args], options: FLAGS, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message.split('. To specify')[0]?.replace(/^Unknown option/, 'unknown flag') ?? 'bad arguments');
  }
}

export const runDatastoreMigrateCommand: ClusterCommand = async (args, env, io) => {
  try {
    return await run(args, env, io);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`netplugctl: ${err.message}\n`);
    return err.exitCode;
  }
};

async function run(args: readonly string[], env: NodeJS.ProcessEnv, io: ClusterCommandIo): Promise<number> {
  const { values, positionals } = parse(args);
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  const [command, ...extra] = positionals;
  if (command === undefined || !(command in OWN_FLAGS))
    throw new UsageError(`datastore migrate needs one of lock, unlock, export, import${command ? `, got "${command}"` : ''}`);
  if (extra.length > 0) throw new UsageError(`datastore migrate ${command} takes no arguments, got "${extra.join(' ')}"`);
  const allowed = new Set([...DATASTORE_FLAG_NAMES, ...(OWN_FLAGS[command] ?? [])]);
  const stray = Object.keys(values).find((flag) => !allowed.has(flag));
  if (stray) throw new UsageError(`datastore migrate ${command} does not take --${stray}`);

  switch (command) {
    case 'lock':
      return withStore(values, env, true, async (store) => io.out(await lockDatastore(store)));
    case 'unlock':
      return withStore(values, env, true, async (store) => io.out(await unlockDatastore(store)));
    case 'export':
      return exportCommand(values, env, io);
    default:
      return importCommand(values, env, io);
  }
}

async function exportCommand(values: Flags, env: NodeJS.ProcessEnv, io: ClusterCommandIo): Promise<number> {
  const file = values.file;
  const output = values.output ?? (file && /\.ya?ml$/.test(file) ? 'yaml' : 'json');
  if (output !== 'json' && output !== 'yaml') throw new UsageError(`-o "${output}" must be json or yaml`);
  return withStore(values, env, false, async (store) => {
    const exported = await exportDatastore(store, { allowUnlocked: values['allow-unlocked'] === true });
    const text = formatExport(exported, output);
    if (!file) return io.out(text);
    // Written whole or not at all: a half-written export must not be imported.
    const partial = `${file}.partial`;
    try {
      writeFileSync(partial, text, { mode: 0o600 });
      renameSync(partial, file);
    } catch (err) {
      rmSync(partial, { force: true });
      throw new UsageError(`-f ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, 1);
    }
    const counts = Object.fromEntries(Object.entries(exported.sections).map(([name, entries]) => [name, entries.length]));
    io.out(`exported ${describeSections(counts)} from ${store.description} to ${file}\n`);
  });
}

async function importCommand(values: Flags, env: NodeJS.ProcessEnv, io: ClusterCommandIo): Promise<number> {
  const file = values.file;
  if (!file) throw new UsageError('datastore migrate import needs -f FILE, the file export wrote');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`-f ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, 1);
  }
  let data: ReturnType<typeof parseExport>;
  try {
    data = parseExport(text);
  } catch (err) {
    throw new UsageError(`-f ${file}: ${(err as Error).message}`, 1);
  }
  const settings = datastoreSettings(values, env);
  if (settings.datastore_type !== 'kubernetes')
    throw new UsageError(
      'datastore migrate import writes to the Kubernetes datastore: give --kubeconfig FILE (or --datastore-type kubernetes)',
    );
  return withStore(values, env, true, async (store) => {
    const report = await importDatastore(store, data, store instanceof KubeStore ? (name, a) => store.annotateNode(name, a) : undefined);
    const skipped = report.alreadyThere > 0 ? ` (${report.alreadyThere} documents were there already from an interrupted import)` : '';
    io.out(`imported ${describeSections(report.created)} into ${store.description}${skipped}\n`);
    if (report.missingNodes.length > 0) {
      io.out(
        `nodes without a Kubernetes Node (their data is imported; the Kubernetes datastore's nodes are the cluster's Node objects): ${report.missingNodes.join(', ')}\n`,
      );
    }
    if (report.addressesCarried.length > 0)
      io.out(
        `node addresses carried over to their Kubernetes Nodes (annotations, read by the nodes already switched): ${report.addressesCarried.join(', ')}\n`,
      );
    if (report.labelsMissing.length > 0)
      io.out(
        `node labels of etcd registrations not on the Kubernetes Node (pool node selectors match Node labels): ${report.labelsMissing.join('; ')}\n`,
      );
    io.out('the Kubernetes datastore is locked: switch the nodes to it, then run netplugctl datastore migrate unlock --kubeconfig FILE\n');
  });
}

/** Opens the datastore the flags choose, refuses writes by a client older than the cluster, and closes it after `work`. */
async function withStore(values: Flags, env: NodeJS.ProcessEnv, writes: boolean, work: (store: Store) => Promise<void>): Promise<number> {
  const store = await openStore(datastoreSettings(values, env));
  try {
    if (writes) await refuseOlderClient(store, values['allow-version-mismatch'] === true);
    await work(store);
    return 0;
  } finally {
    store.close();
  }
}
