// netplugctl migrate owner-references --check|--strip|--restore [--kubeconfig FILE] [-o json]:
// the specification's "Owner references" steps (ts/migrate/owner-references.ts). Exit 0 done
// (--check: none found), 1 found (--check) or not all done, with one line on stderr saying what
// to run or what is left; 2 a usage mistake.
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { parseArgs } from 'node:util';

import * as k8s from '@kubernetes/client-node';

import type { ClusterCommand, ClusterCommandIo } from '../ctl/cluster-command.ts';
import { table } from '../ctl/table.ts';
import {
  describeDependent,
  describeOwner,
  findOwnerReferences,
  RECORD_NAME,
  RECORD_NAMESPACE,
  restoreOwnerReferences,
  stripOwnerReferences,
  type FindReport,
  type FoundReference,
  type RestoreResult,
  type StripResult,
  type Unsearched,
} from './owner-references.ts';

const COMMAND = 'netplugctl migrate owner-references';
const RECORD = `ConfigMap ${RECORD_NAMESPACE}/${RECORD_NAME}`;

const USAGE = `usage: ${COMMAND} --check|--strip|--restore [--kubeconfig FILE] [-o table|json]

Objects whose ownerReferences name a netplug resource (crd.projectnet.org, operator.projectnet.org,
projectnet.org) are garbage collected when that resource is recreated with a new UID. Before an
upgrade, strip those references; after it, restore them with the owners' new UIDs.

  --check     list the references in the cluster (exit 1 if any), and what the record holds
  --strip     record each reference in ${RECORD},
              then remove it from its object (a guarded patch: an object changed meanwhile is
              left as it is, and reported; run --strip again)
  --restore   add each recorded reference back with its owner's current UID, and clear it from the
              record; an owner that no longer exists is reported (exit 1), its reference left out
  --kubeconfig FILE   else KUBECONFIG, else ~/.kube/config, else the pod's service account
  -o table|json       output (default table)

Run as a cluster administrator: it lists every resource, patches the objects holding references,
and writes the record in ${RECORD_NAMESPACE}.
`;

const OPTIONS = {
  check: { type: 'boolean' },
  strip: { type: 'boolean' },
  restore: { type: 'boolean' },
  kubeconfig: { type: 'string' },
  output: { type: 'string', short: 'o' },
  help: { type: 'boolean', short: 'h' },
} as const;

class Usage extends Error {}

export const runOwnerReferencesCommand: ClusterCommand = async (args, env, io) => {
  let flags: ReturnType<typeof parse>;
  try {
    flags = parse(args);
  } catch (err) {
    if (!(err instanceof Usage)) throw err;
    io.err(`${COMMAND}: ${err.message}\n`);
    return 2;
  }
  if (flags.help) {
    io.out(USAGE);
    return 0;
  }
  const kube = loadKubeconfig(flags.kubeconfig, env);
  if (typeof kube === 'string') {
    io.err(`${COMMAND}: ${kube}\n`);
    return 1;
  }
  const json = flags.output === 'json';
  try {
    if (flags.mode === 'check') return report(io, json, await findOwnerReferences(kube), showCheck);
    if (flags.mode === 'strip') return report(io, json, await stripOwnerReferences(kube), showStrip);
    return report(io, json, await restoreOwnerReferences(kube), showRestore);
  } catch (err) {
    io.err(`${COMMAND}: ${describeFailure(err, kube)}\n`);
    return 1;
  }
};

/** One line: the API server's message, or why it could not be reached (fetch hides that in its cause). */
function describeFailure(err: unknown, kube: k8s.KubeConfig): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  if (err instanceof TypeError && cause) {
    return `cannot reach the API server ${kube.getCurrentCluster()?.server}: ${cause.code ?? cause.message}`;
  }
  return (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? 'failed';
}

function parse(args: readonly string[]) {
  let parsed: { values: { [flag: string]: string | boolean | undefined }; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    // node:util names the flag; its advice about "--" does not apply here.
    throw new Usage(((err as Error).message.split('. To specify')[0] ?? 'bad arguments').replace(/^Unknown option/, 'unknown flag'));
  }
  const { values, positionals } = parsed;
  if (positionals.length > 0) throw new Usage(`unexpected argument "${positionals[0]}"; ${COMMAND} --help`);
  const output = values['output'] ?? 'table';
  if (output !== 'table' && output !== 'json') throw new Usage(`-o "${String(output)}" must be table or json`);
  const modes = (['check', 'strip', 'restore'] as const).filter((mode) => values[mode] === true);
  if (values['help'] === true) return { help: true, mode: 'check' as const, output, kubeconfig: undefined };
  if (modes.length !== 1) {
    throw new Usage(
      modes.length === 0 ? 'give one of --check, --strip, --restore' : `--${modes.join(' and --')} cannot go together: give one`,
    );
  }
  const kubeconfig = values['kubeconfig'];
  if (kubeconfig === '') throw new Usage('--kubeconfig "" must name a file');
  return { help: false, mode: modes[0] as 'check' | 'strip' | 'restore', output, kubeconfig: kubeconfig as string | undefined };
}

/** --kubeconfig, else KUBECONFIG (a list, merged as kubectl does), else ~/.kube/config, else in cluster; or what is wrong. */
function loadKubeconfig(flag: string | undefined, env: NodeJS.ProcessEnv): k8s.KubeConfig | string {
  const config = new k8s.KubeConfig();
  const files = flag ? [flag] : (env['KUBECONFIG'] ?? '').split(delimiter).filter(Boolean);
  const home = env['HOME'] ? join(env['HOME'], '.kube', 'config') : undefined;
  if (files.length === 0 && home && existsSync(home)) files.push(home);
  try {
    if (files.length === 0) {
      if (!env['KUBERNETES_SERVICE_HOST']) return 'no kubeconfig: give --kubeconfig FILE or set KUBECONFIG';
      config.loadFromCluster();
      return config;
    }
    for (const [i, file] of files.entries()) {
      const next = i === 0 ? config : new k8s.KubeConfig();
      next.loadFromFile(file);
      if (i > 0) config.mergeConfig(next);
    }
  } catch (err) {
    const source = flag ? `--kubeconfig ${flag}` : `kubeconfig ${files.join(delimiter)}`;
    return `${source}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message.split('\n')[0]}`;
  }
  if (!config.getCurrentCluster()) return `${flag ? `--kubeconfig ${flag}` : 'the kubeconfig'}: no current context with a cluster`;
  return config;
}

/** Prints a result as a table or JSON; the exit code and the line on stderr come from `show`. */
function report<T>(io: ClusterCommandIo, json: boolean, result: T, show: (result: T) => { text: string; problem?: string }): number {
  const { text, problem } = show(result);
  io.out(json ? `${JSON.stringify(result, null, 2)}\n` : text);
  if (!problem) return 0;
  io.err(`${COMMAND}: ${problem}\n`);
  return 1;
}

const referenceRows = (references: readonly FoundReference[]) =>
  references.map((r) => [
    r.dependent.namespace ?? '',
    r.dependent.kind,
    r.dependent.name,
    `${r.owner.kind}/${r.owner.name}`,
    r.owner.apiVersion,
    r.owner.uid,
  ]);
const REFERENCE_HEADER = ['NAMESPACE', 'KIND', 'NAME', 'OWNER', 'OWNER API VERSION', 'OWNER UID'];

const unsearchedLines = (unsearched: readonly Unsearched[]) => unsearched.map((u) => `not searched: ${u.what}: ${u.error}\n`).join('');
const unsearchedProblem = (unsearched: readonly Unsearched[]) =>
  `could not list ${unsearched.map((u) => u.what).join(', ')} (${unsearched[0]?.error}): references there are unknown`;

function showCheck(found: FindReport): { text: string; problem?: string } {
  let text =
    found.references.length > 0 ? table(REFERENCE_HEADER, referenceRows(found.references)) : 'No owner references to netplug resources.\n';
  text += unsearchedLines(found.unsearched);
  if (found.recorded.length > 0) {
    text += `${found.recorded.length} recorded in ${RECORD} await a restore: after the upgrade, run ${COMMAND} --restore\n`;
  }
  if (found.references.length > 0) {
    return {
      text,
      problem: `${found.references.length} owner references to netplug resources: before the upgrade, run ${COMMAND} --strip`,
    };
  }
  return found.unsearched.length > 0 ? { text, problem: unsearchedProblem(found.unsearched) } : { text };
}

function showStrip(result: StripResult): { text: string; problem?: string } {
  let text = '';
  for (const r of result.stripped)
    text += `stripped ${describeDependent(r.dependent)}: owner ${describeOwner(r.owner)} uid ${r.owner.uid}\n`;
  for (const r of result.gone) text += `deleted meanwhile: ${describeDependent(r.dependent)}\n`;
  for (const f of result.failed) text += `not stripped: ${f.error}\n`;
  text += unsearchedLines(result.unsearched);
  text += `${result.recorded.length} recorded in ${RECORD}, ${result.stripped.length} stripped, ${result.failed.length} not stripped\n`;
  if (result.failed.length > 0) {
    const first = result.failed[0]?.error ?? '';
    return { text, problem: `${result.failed.length} references not stripped (${first})` };
  }
  if (result.unsearched.length > 0) return { text, problem: unsearchedProblem(result.unsearched) };
  return { text };
}

function showRestore(result: RestoreResult): { text: string; problem?: string } {
  let text = '';
  for (const r of result.restored) {
    const was = r.entry.owner.uid === r.owner.uid ? '' : ` (was ${r.entry.owner.uid})`;
    const how = r.action === 'present' ? 'already there' : r.action;
    text += `restored ${describeDependent(r.entry.dependent)}: owner ${describeOwner(r.owner)} uid ${r.owner.uid}${was}, ${how}\n`;
  }
  for (const g of result.goneDependents) text += `deleted since the strip, nothing to restore: ${describeDependent(g.entry.dependent)}\n`;
  for (const m of result.missingOwners)
    text += `not restored: ${describeDependent(m.entry.dependent)}: ${m.reason} (kept in ${RECORD}, key ${m.key})\n`;
  for (const f of result.failed) text += `not restored: ${f.error}\n`;
  for (const key of result.unreadableKeys) text += `unreadable: key ${key} of ${RECORD}, left as it is\n`;
  text += `${result.restored.length} restored, ${result.missingOwners.length + result.failed.length} not restored\n`;
  if (result.missingOwners.length > 0) {
    return { text, problem: `references left out, their owners are gone: ${result.missingOwners.map((m) => m.reason).join('; ')}` };
  }
  if (result.failed.length > 0) return { text, problem: `${result.failed.length} references not restored (${result.failed[0]?.error})` };
  if (result.unreadableKeys.length > 0) return { text, problem: `${RECORD} has unreadable keys: ${result.unreadableKeys.join(', ')}` };
  return { text };
}
