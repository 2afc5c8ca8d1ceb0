// netplugctl, the admin CLI, as a function: (arguments, environment) → (stdout, stderr, exit code).
// Exit 0 on success, 1 when the request is refused or the datastore fails, 2 on a usage mistake;
// every failure is one line on stderr, and nothing is changed by a refused request.
import { parseArgs, type ParseArgsConfig } from 'node:util';

import type { Store } from '../store/store.ts';
import { CLUSTER_COMMANDS } from './cluster-command.ts';
import { DATASTORE_FLAGS } from './datastore.ts';
import { UsageError } from './usage.ts';

export interface CtlOutcome {
  stdout: string;
  stderr: string;
  exitCode: number;
}

type Env = Readonly<Record<string, string | undefined>>;

const USAGE = `usage: netplugctl [datastore flags] <command> [flags]

commands:
  pool create NAME --cidr CIDR [--block-size N] [--node-selector EXPR]
                   [--ipip-mode Never|Always|CrossSubnet] [--vxlan-mode Never|Always|CrossSubnet]
                   [--nat-outgoing] [--disabled]
  pool update NAME [--disable|--enable] [--node-selector EXPR] [--nat-outgoing true|false]
                   [--ipip-mode Never|Always|CrossSubnet] [--vxlan-mode Never|Always|CrossSubnet]
                               a disabled pool gives no new addresses; those allocated stay
  pool delete NAME [--force]   refused while the pool has allocated addresses, unless --force
                               (they stay allocated until their pods are deleted)
  pool list | pool get NAME
  node create NAME [--label KEY=VALUE]... | node list | node delete NAME
  ipam show [--ip IP]          usage per pool and block, or who holds an address and since when
  ipam check [--grace-period SECONDS]
                               leaks and inconsistencies; exit 1 if any
  ipam release --ip IP [--force]
                               free a leaked address
  version [--client]           this netplugctl's version, the cluster's (ClusterInformation "default":
                               the lowest release a node records) and each node's

network policy (projectnet.org/v3: networkpolicy|np, globalnetworkpolicy|gnp, networkset,
globalnetworkset, tier, profile):
  apply -f FILE [-f FILE]... [-n NS]
                               create or update the resources of YAML or JSON files (several
                               documents, a List; - for stdin), all checked before any is written
  get KIND [NAME] [-n NS | -A] [-o table|yaml|json]
  delete KIND NAME [-n NS] | delete -f FILE
  explain pod NS/NAME [--peer NS/POD|IP --port PORT/PROTO] [--direction ingress|egress]
                               the policies that apply to a pod, in order; with a peer and port,
                               what each side decides and which policy and rule decided it

cluster commands (each has --help):
  upgrade plan|apply|status|rollback
                               upgrade the cluster to this netplugctl's release, step by step, resumable
  migrate owner-references --check|--strip|--restore
                               owner references to netplug resources, kept across an upgrade
  migrate auto-host-endpoints  move all-interfaces host endpoints to automatic ones
  migrate host-local           on a host-local manifest install: remove upgrade-ipam, set USE_POD_CIDR
  datastore migrate export|import|lock|unlock
                               move netplug's data from etcd to the Kubernetes datastore
  flows [--namespace NS] [--pod [NS/]NAME] [--policy NAME] [--action Allow|Deny] [--node NODE]
        [--since DURATION] [--limit N] [--follow] [-o table|json] [--server URL]
                               the flow logs netplug-flows holds (what each node's policy decided),
                               through the API server's port-forward, or at --server URL

Commands that write refuse when this netplugctl is older than the cluster's netplug (after an
upgrade, use the new netplugctl); --allow-version-mismatch writes anyway.

datastore (flags, else the netconf or conflist of --config FILE, else DATASTORE_TYPE, ETCD_ENDPOINTS, ...):
  --datastore-type etcdv3|kubernetes  --etcd-endpoints URLS  --etcd-discovery-srv DOMAIN
  --etcd-key-file FILE  --etcd-cert-file FILE  --etcd-ca-cert-file FILE
  --kubeconfig FILE (the Kubernetes datastore; implies --datastore-type kubernetes)
  --k8s-api-root URL (the Kubernetes datastore, without credentials)

output: -o table (default) | -o json (| -o yaml for get)
`;

const GLOBAL = {
  ...DATASTORE_FLAGS,
  'allow-version-mismatch': { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

/** The flags each command takes besides the global ones. */
const COMMAND_FLAGS = {
  'pool create': {
    cidr: { type: 'string' },
    'block-size': { type: 'string' },
    'node-selector': { type: 'string' },
    'ipip-mode': { type: 'string' },
    'vxlan-mode': { type: 'string' },
    'nat-outgoing': { type: 'boolean' },
    disabled: { type: 'boolean' },
  },
  'pool update': {
    disable: { type: 'boolean' },
    enable: { type: 'boolean' },
    'node-selector': { type: 'string' },
    'nat-outgoing': { type: 'string' },
    'ipip-mode': { type: 'string' },
    'vxlan-mode': { type: 'string' },
  },
  'pool delete': { force: { type: 'boolean' } },
  'node create': { label: { type: 'string', multiple: true } },
  'ipam show': { ip: { type: 'string' } },
  'ipam check': { 'grace-period': { type: 'string' } },
  'ipam release': { ip: { type: 'string' }, force: { type: 'boolean' } },
  version: { client: { type: 'boolean' } },
  apply: { filename: { type: 'string', short: 'f', multiple: true }, namespace: { type: 'string', short: 'n' } },
  get: { namespace: { type: 'string', short: 'n' }, 'all-namespaces': { type: 'boolean', short: 'A' } },
  delete: { filename: { type: 'string', short: 'f', multiple: true }, namespace: { type: 'string', short: 'n' } },
  'explain pod': { peer: { type: 'string' }, port: { type: 'string' }, direction: { type: 'string' } },
} as const satisfies Record<string, ParseArgsConfig['options']>;

/** Each command and how many NAME arguments it takes (a number, or the least and the most). */
const COMMANDS: Record<string, number | [number, number]> = {
  'pool create': 1,
  'pool update': 1,
  'pool list': 0,
  'pool get': 1,
  'pool delete': 1,
  'node create': 1,
  'node list': 0,
  'node delete': 1,
  'ipam show': 0,
  'ipam check': 0,
  'ipam release': 0,
  version: 0,
  apply: 0,
  get: [1, 2],
  delete: [0, 2],
  'explain pod': 1,
};

/** The commands that write to the datastore: refused for a netplugctl older than the cluster. */
const WRITES = new Set(['pool create', 'pool update', 'pool delete', 'node create', 'node delete', 'ipam release', 'apply', 'delete']);

type Options = NonNullable<ParseArgsConfig['options']>;
const ALL_FLAGS: Options = { ...Object.assign({}, ...Object.values(COMMAND_FLAGS)), ...GLOBAL };
/**
 * Which command it is, found before its flags are parsed: the flags that take a value for every
 * command that has them (their values are not mistaken for command words); the others, switches.
 */
const VALUED_FLAGS: Options = {
  ...Object.fromEntries(
    Object.entries(ALL_FLAGS).filter(([flag]) =>
      Object.values(COMMAND_FLAGS as Record<string, Options>).every((flags) => (flags[flag]?.type ?? 'string') === 'string'),
    ),
  ),
  help: GLOBAL.help,
};

export async function runCtlMain(argv: readonly string[], env: Env = {}): Promise<CtlOutcome> {
  try {
    return { stdout: await run(argv, env), stderr: '', exitCode: 0 };
  } catch (err) {
    if (err instanceof CheckFailed) return { stdout: err.report, stderr: '', exitCode: 1 };
    if (err instanceof Error && err.name === 'VersionUnknown')
      return { stdout: (err as Error & { report: string }).report, stderr: `netplugctl: ${err.message}\n`, exitCode: 1 };
    const { message, exitCode } = describeFailure(err);
    return { stdout: '', stderr: `netplugctl: ${message}\n`, exitCode };
  }
}

async function run(argv: readonly string[], env: Env): Promise<string> {
  // A flag may mean different things to different commands (--nat-outgoing: a switch to pool
  // create, true|false to pool update): find the command first, then parse its flags.
  const loose = parseArgs({ args: [...argv], options: VALUED_FLAGS, allowPositionals: true, strict: false });
  if (loose.values['help'] || loose.positionals[0] === 'help') return USAGE;
  if (loose.positionals.length === 0) throw new UsageError('no command given; netplugctl --help lists them');
  // The built executable sends these to the agents bundle (ts/cli/sea-main.ts) before this runs.
  if ((CLUSTER_COMMANDS as readonly string[]).includes(loose.positionals[0] as string))
    throw new UsageError(
      `"${loose.positionals[0]}" is served by the netplugctl executable (ts/cli/cluster-commands.ts), not this entry point`,
    );
  const single = loose.positionals[0] as string;
  const command = single in COMMANDS ? single : loose.positionals.slice(0, 2).join(' ');
  const expected = COMMANDS[command];
  if (expected === undefined) throw new UsageError(`unknown command "${loose.positionals.slice(0, 2).join(' ')}"`);
  const { values, positionals } = parseFlags(argv, { ...ALL_FLAGS, ...(COMMAND_FLAGS as Record<string, Options>)[command], ...GLOBAL });
  const names = positionals.slice(command.split(' ').length);
  if (Array.isArray(expected)) checkPolicyArguments(command, names, expected, values);
  else if (names.length !== expected) {
    throw new UsageError(
      expected === 0
        ? `${command} takes no arguments, got "${names.join(' ')}"`
        : `${command} needs a NAME${names.length > 1 ? `, got "${names.join(' ')}"` : ''}`,
    );
  }
  const allowed = new Set([...Object.keys(GLOBAL), ...Object.keys((COMMAND_FLAGS as Record<string, object>)[command] ?? {})]);
  const stray = Object.keys(values).find((flag) => !allowed.has(flag));
  if (stray) throw new UsageError(`${command} does not take --${stray}`);
  const output = values['output'] ?? 'table';
  if (output === 'yaml' && command !== 'get') throw new UsageError(`-o yaml is for get; ${command} takes -o table or json`);
  if (output !== 'table' && output !== 'json' && output !== 'yaml')
    throw new UsageError(`-o "${String(output)}" must be table or json (or yaml for get)`);
  const json = output === 'json';
  if (command === 'version' && values['client'] === true) return (await import('./version.ts')).clientVersion(json);

  const name = names[0] as string;
  const flags = values;
  const store = await openDatastore(flags, env);
  try {
    if (WRITES.has(command)) await (await import('./version.ts')).refuseOlderClient(store, flags['allow-version-mismatch'] === true);
    switch (command) {
      case 'version':
        return await (await import('./version.ts')).versions(store, json);
      case 'pool create':
        return await (await import('./pools.ts')).createPool(store, name, flags);
      case 'pool list':
        return await (await import('./pools.ts')).listPoolsCommand(store, json);
      case 'pool get':
        return await (await import('./pools.ts')).getPool(store, name, json);
      case 'pool update':
        return await (await import('./pool-update.ts')).updatePool(store, name, flags);
      case 'pool delete':
        return await (await import('./pools.ts')).deletePool(store, name, flags['force'] === true);
      case 'node create':
        return await (await import('./nodes.ts')).createNode(store, name, (flags['label'] as string[] | undefined) ?? []);
      case 'node list':
        return await (await import('./nodes.ts')).listNodes(store, json);
      case 'node delete':
        return await (await import('./nodes.ts')).deleteNode(store, name);
      case 'ipam show': {
        const show = await import('./ipam-show.ts');
        return typeof flags['ip'] === 'string' ? await show.showAddress(store, flags['ip'], json) : await show.showIpam(store, json);
      }
      case 'ipam check': {
        const grace = flags['grace-period'] === undefined ? 900 : Number(flags['grace-period']);
        if (!Number.isFinite(grace) || grace < 0)
          throw new UsageError(`--grace-period "${String(flags['grace-period'])}" must be a number of seconds`);
        const { checkIpam } = await import('./ipam-check.ts');
        const { text, clean } = await checkIpam(store, json, { gracePeriodSeconds: grace, now: new Date() });
        if (!clean) throw new CheckFailed(text);
        return text;
      }
      case 'ipam release':
        return await (await import('./ipam-release.ts')).releaseIp(store, flags['ip'] as string | undefined, flags['force'] === true);
      case 'apply':
      case 'delete':
      case 'get':
      case 'explain pod':
        return await (await import('./policy-command.ts')).runPolicyCommand(
          store,
          command,
          names,
          flags,
          output as 'table' | 'json' | 'yaml',
        );
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } finally {
    store.close();
  }
}

/** get KIND [NAME], delete KIND NAME or delete -f FILE, apply -f FILE: the arguments that go together. */
function checkPolicyArguments(command: string, names: string[], [least, most]: [number, number], values: Record<string, unknown>): void {
  const files = values['filename'] !== undefined;
  if (command === 'delete' && files !== (names.length === 0)) throw new UsageError('delete takes KIND NAME, or -f FILE (not both)');
  if (command === 'delete' && !files && names.length !== 2) throw new UsageError('delete needs KIND and NAME (or -f FILE)');
  if (names.length < least || names.length > most)
    throw new UsageError(`${command} takes ${least === most ? least : `${least} to ${most}`} arguments (KIND [NAME]), got ${names.length}`);
}

function parseFlags(
  argv: readonly string[],
  options: Options,
): { values: Record<string, string | boolean | string[] | undefined>; positionals: string[] } {
  try {
    return parseArgs({ args: [...argv], options, allowPositionals: true, strict: true }) as {
      values: Record<string, string | boolean | string[] | undefined>;
      positionals: string[];
    };
  } catch (err) {
    // node:util's messages name the flag; drop its advice about "--" which does not apply here.
    throw new UsageError((err as Error).message.split('. To specify')[0]?.replace(/^Unknown option/, 'unknown flag') ?? 'bad arguments');
  }
}

async function openDatastore(flags: Record<string, unknown>, env: Env): Promise<Store> {
  const [{ datastoreSettings }, { openStore }] = await Promise.all([import('./datastore.ts'), import('../store/open.ts')]);
  return openStore(datastoreSettings(flags, env));
}

/** ipam check found problems: its report goes to stdout, and the exit code is 1. */
class CheckFailed extends Error {
  readonly report: string;

  constructor(report: string) {
    super('ipam check found problems');
    this.report = report;
  }
}

function describeFailure(err: unknown): { message: string; exitCode: number } {
  if (err instanceof UsageError) return { message: err.message, exitCode: err.exitCode };
  if (err instanceof Error) {
    switch (err.name) {
      case 'StoreUnavailableError':
      case 'StoreError':
      case 'StoreDocumentError':
      case 'EtcdSettingsError':
      case 'KubeSettingsError':
      case 'KubeUnavailableError':
      case 'KubeError':
      case 'SelectorError':
      case 'IpamError':
        return { message: err.message, exitCode: 1 };
    }
    return { message: `internal error: ${err.message}`, exitCode: 1 };
  }
  return { message: `internal error: ${String(err)}`, exitCode: 1 };
}
