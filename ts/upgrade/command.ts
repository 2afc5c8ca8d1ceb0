// netplugctl upgrade plan|apply|status|rollback: the spec's upgrade procedures, detected and done
// with checks. Flags are parsed here (node:util parseArgs); the
// work is in plan.ts, apply.ts, status.ts and rollback.ts.
import { parseArgs } from 'node:util';

import { parseDuration } from '../config/duration.ts';
import type { ClusterCommand } from '../ctl/cluster-command.ts';
import { DATASTORE_FLAGS, datastoreSettings } from '../ctl/datastore.ts';
import { UsageError } from '../ctl/usage.ts';
import { NETPLUG_VERSION } from '../version.ts';
import { ApplyRefused, applyUpgrade } from './apply.ts';
import { NotInstalled } from './detect.ts';
import { openUpgradeKube } from './kube.ts';
import { makePlan, type UpgradeInputs } from './plan.ts';
import { formatPlan, planJson } from './print.ts';
import { readReleaseFile } from './release-files.ts';
import { RollbackRefused, rollbackUpgrade } from './rollback.ts';
import { upgradeStatus } from './status.ts';

const USAGE = `Usage: netplugctl upgrade plan|apply|status|rollback [flags]

Upgrades the cluster's netplug to this netplugctl's release, ${NETPLUG_VERSION}, by the procedure
that matches how it was installed (helm, operator, manifest; Kubernetes or etcd datastore).

  plan       detect the install, check it, dry-run every object on the server, print the steps
             (reads only). Exit 0 ready (or nothing to do), 1 blocked, 2 usage.
  apply      perform the steps (needs --yes), recording progress in ConfigMap netplug-upgrade;
             run again to resume after an interruption.
  status     the recorded upgrade's steps, each node's version, rollouts, the cluster's version.
  rollback   undo the recorded upgrade where its steps allow, newest first.

Release files (as for the spec's "download the release's files and reapply your edits"):
  --manifest FILE            manifest installs: netplug.yaml / netplug-etcd.yaml / netplug-host-local.yaml
  --crds FILE                manifest installs: crds.yaml
  --operator-crds FILE       operator and helm installs: operator-crds.yaml
  --operator-manifest FILE   operator installs: netplug-operator.yaml (default: this release's, rendered)
  --chart TGZ|REPO/CHART     helm installs: the netplug-operator chart
  --release NAME, -n NS      helm installs: the release and its namespace (default: detected)
  --helm PATH                the helm binary (default: helm on PATH)
Cluster and datastore:
  --kubeconfig FILE          (default: KUBECONFIG, else ~/.kube/config)
  --etcd-endpoints URLS, --etcd-ca-cert-file, --etcd-cert-file, --etcd-key-file, --etcd-discovery-srv
                             etcd installs: where ClusterInformation is (default: netplug-config's etcd_endpoints)
Other:
  --skip-allow-all-upgrade   plan, apply: from a release without network policy (before v3.31.0),
                             enforce the cluster's policies as soon as each node runs this release,
                             without the temporary GlobalNetworkPolicy allow-all-upgrade (Log, then
                             Allow) the upgrade otherwise creates first when the cluster has any
  --yes                      apply: perform the steps
  --timeout DUR              apply, rollback: how long each wait may take (default 10m)
  -o json                    plan, status: JSON
`;

const OPTIONS = {
  manifest: { type: 'string' },
  crds: { type: 'string' },
  'operator-crds': { type: 'string' },
  'operator-manifest': { type: 'string' },
  chart: { type: 'string' },
  release: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  helm: { type: 'string' },
  ...DATASTORE_FLAGS,
  yes: { type: 'boolean' },
  'skip-allow-all-upgrade': { type: 'boolean' },
  timeout: { type: 'string' },
  output: { type: 'string', short: 'o' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** What plan and apply both take: the release's files, the helm release, allow-all-upgrade. */
const PROCEDURE_FLAGS = [
  'manifest',
  'crds',
  'operator-crds',
  'operator-manifest',
  'chart',
  'release',
  'namespace',
  'helm',
  'skip-allow-all-upgrade',
];
const ALLOWED: Record<string, readonly string[]> = {
  plan: [...PROCEDURE_FLAGS, 'output'],
  apply: [...PROCEDURE_FLAGS, 'yes', 'timeout'],
  status: ['output'],
  rollback: ['helm', 'timeout'],
};
const COMMON = ['kubeconfig', 'etcd-endpoints', 'etcd-discovery-srv', 'etcd-key-file', 'etcd-cert-file', 'etcd-ca-cert-file', 'help'];

export const runUpgradeCommand: ClusterCommand = async (args, env, io) => {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    return usage(io, `netplugctl upgrade: ${(err as Error).message}`);
  }
  const { values, positionals } = parsed;
  const sub = positionals[0];
  if (values.help || sub === 'help') {
    io.out(USAGE);
    return 0;
  }
  if (!sub || !(sub in ALLOWED))
    return usage(
      io,
      `netplugctl upgrade: ${sub ? `unknown subcommand "${sub}"` : 'a subcommand is required'}: one of plan, apply, status, rollback`,
    );
  if (positionals.length > 1) return usage(io, `netplugctl upgrade ${sub}: unexpected argument "${positionals[1]}"`);
  const wrong = Object.keys(values).find((flag) => !COMMON.includes(flag) && !(ALLOWED[sub] as readonly string[]).includes(flag));
  if (wrong) return usage(io, `netplugctl upgrade ${sub}: --${wrong} does not apply to ${sub}`);
  if (values.output !== undefined && values.output !== 'json')
    return usage(io, `netplugctl upgrade ${sub}: -o "${values.output}": only json is supported`);
  const timeoutMs = values.timeout === undefined ? 600_000 : parseDuration(values.timeout);
  if (timeoutMs === undefined || timeoutMs <= 0)
    return usage(io, `netplugctl upgrade ${sub}: --timeout "${values.timeout}" is not a duration (for example 10m, 90s)`);

  try {
    const kube = openUpgradeKube(values.kubeconfig, env);
    const datastore = datastoreSettings({ ...values, kubeconfig: undefined }, { ...env, KUBECONFIG: undefined });
    const helmBinary = values.helm ?? 'helm';
    if (sub === 'status') {
      io.out(await upgradeStatus(kube, datastore, values.output === 'json'));
      return 0;
    }
    if (sub === 'rollback') {
      io.out(`${await rollbackUpgrade(kube, { datastore, helmBinary, timeoutMs, out: io.out, signal: io.signal })}\n`);
      return 0;
    }
    const inputs: UpgradeInputs = {
      kubeconfig: kube.kubeconfigPath,
      datastore,
      manifest: values.manifest === undefined ? undefined : readReleaseFile('--manifest', values.manifest),
      crds: values.crds === undefined ? undefined : readReleaseFile('--crds', values.crds),
      operatorCrds: values['operator-crds'] === undefined ? undefined : readReleaseFile('--operator-crds', values['operator-crds']),
      operatorManifest:
        values['operator-manifest'] === undefined ? undefined : readReleaseFile('--operator-manifest', values['operator-manifest']),
      chart: values.chart,
      release: values.release,
      helmNamespace: values.namespace,
      helmBinary,
      skipAllowAllUpgrade: values['skip-allow-all-upgrade'] === true,
    };
    const plan = await makePlan(kube, inputs);
    if (sub === 'plan') {
      io.out(values.output === 'json' ? planJson(plan) : formatPlan(plan));
      if (plan.state === 'blocked') {
        io.err(`netplugctl upgrade plan: blocked: ${plan.blockedBy.join('; ')}\n`);
        return 1;
      }
      return 0;
    }
    io.out(`${await applyUpgrade(kube, plan, inputs, { yes: values.yes === true, timeoutMs, out: io.out, signal: io.signal })}\n`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) return err.exitCode === 2 ? usage(io, `netplugctl upgrade ${sub}: ${err.message}`) : fail(io, sub, err);
    if (err instanceof ApplyRefused) {
      io.err(`netplugctl upgrade ${sub}: ${err.message}\n`);
      return err.exitCode;
    }
    if (err instanceof NotInstalled || err instanceof RollbackRefused) return fail(io, sub, err);
    return fail(io, sub, err as Error);
  }
};

function usage(io: { err(text: string): void }, message: string): number {
  io.err(`${message} (see netplugctl upgrade --help)\n`);
  return 2;
}

function fail(io: { err(text: string): void }, sub: string, err: Error): number {
  io.err(`netplugctl upgrade ${sub}: ${err.message.split('\n')[0]}\n`);
  return 1;
}
