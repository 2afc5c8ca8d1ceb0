// One fuzz case through the built plugin, as a runtime handles an attachment: ADD in a fresh
// namespace, then DEL with the same input (what a runtime does after any ADD, failed or not), then
// a look at what is left: the namespace must hold only `lo`, and the host no veth of this case.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';

import { judgeRun, runBounded, codeOf, type ExecOutcome } from './exec.ts';

let namespaces = 0;

/** A network namespace for one case, deleted by the case itself. */
export function addNetns(): { name: string; path: string; remove(): void } {
  const name = `nptest-fuzz-${process.pid}-${namespaces++}`;
  const made = spawnSync('ip', ['netns', 'add', name]);
  if (made.status !== 0) throw new Error(`ip netns add ${name}: ${made.stderr}`);
  return { name, path: `/run/netns/${name}`, remove: () => void spawnSync('ip', ['netns', 'del', name]) };
}

export function linksIn(netns: string): string[] {
  const out = spawnSync('ip', ['-n', netns, '-j', 'link', 'show'], { encoding: 'utf8' });
  return out.status === 0 ? (JSON.parse(out.stdout) as { ifname: string }[]).map((l) => l.ifname) : [];
}

export const hostLinkExists = (name: string) => spawnSync('ip', ['link', 'show', 'dev', name], { stdio: 'ignore' }).status === 0;

/** The host-side veth name netplug derives (prefix + 11 hex digits of SHA-1, cut to 15 bytes). */
export function derivedHostName(env: Record<string, string>): string | undefined {
  const prefix = env['FELIX_INTERFACEPREFIX']?.split(',')[0]?.trim() || 'cali';
  const args = new Map((env['CNI_ARGS'] ?? '').split(';').map((pair) => pair.split('=') as [string, string]));
  const [ns, pod] = [args.get('K8S_POD_NAMESPACE'), args.get('K8S_POD_NAME')];
  const identity = ns && pod ? `${ns}.${pod}` : `${env['CNI_CONTAINERID'] ?? ''}/${env['CNI_IFNAME'] ?? ''}`;
  let name = `${prefix}${createHash('sha1').update(identity).digest('hex').slice(0, 11)}`;
  while (Buffer.byteLength(name) > 15) name = name.slice(0, -1);
  return name;
}

const hostNameTurns = new Map<string, Promise<unknown>>();

/**
 * Runs `work` when no other case with the same derived host interface name is running. Two cases
 * with one pod identity (mutated CNI_ARGS often keep `default/web-0`) are two sandboxes of one pod:
 * the second's ADD replaces the first's host link, and one case's leftover check would see the
 * other's live link.
 */
export function inTurnFor<T>(hostName: string | undefined, work: () => Promise<T>): Promise<T> {
  if (hostName === undefined) return work();
  const previous = hostNameTurns.get(hostName) ?? Promise.resolve();
  const turn = previous.then(work, work);
  const settled = turn.catch(() => undefined);
  hostNameTurns.set(hostName, settled);
  void settled.then(() => {
    if (hostNameTurns.get(hostName) === settled) hostNameTurns.delete(hostName);
  });
  return turn;
}

/** Codes that refuse the input (or say the datastore is unreachable): the DEL of the same input may repeat them. */
const REFUSALS = [1, 4, 6, 7, 11];

export interface AttachmentVerdict {
  add: ExecOutcome;
  del?: ExecOutcome;
  problems: string[];
}

/**
 * ADD then DEL of one attachment. `env` lacks CNI_COMMAND; `addCodes` are the errors ADD may end
 * with; DEL must succeed unless it refuses the same input ADD refused (same code).
 */
export async function attachmentCase(
  env: Record<string, string>,
  input: Buffer,
  addCodes: readonly number[],
  options: { mustFail?: boolean; delCodes?: readonly number[]; cwd?: string } = {},
): Promise<AttachmentVerdict> {
  const problems: string[] = [];
  const limits = options.cwd ? { cwd: options.cwd } : {};
  const add = await runBounded({ ...env, CNI_COMMAND: 'ADD' }, input, limits);
  const addProblem = judgeRun(add, addCodes, options);
  if (addProblem) problems.push(`ADD: ${addProblem}`);
  const addCode = codeOf(add);
  const del = await runBounded({ ...env, CNI_COMMAND: 'DEL' }, input, limits);
  const delAllowed = [...(options.delCodes ?? []), ...(addCode !== undefined && REFUSALS.includes(addCode) ? [addCode] : [])];
  const delProblem = judgeRun(del, delAllowed);
  if (delProblem) problems.push(`DEL after ADD ${add.status === 0 ? 'succeeded' : `failed with ${addCode}`}: ${delProblem}`);
  return { add, del, problems };
}

/** What the case left: links in its namespace besides lo, the host veth; both removed here. */
export function leftovers(netns: { name: string }, hostName: string | undefined, hostBefore: boolean): string[] {
  const found: string[] = [];
  const extra = linksIn(netns.name).filter((l) => l !== 'lo');
  if (extra.length > 0) found.push(`left links in the pod namespace: ${extra.join(', ')}`);
  if (hostName && !hostBefore && hostLinkExists(hostName)) {
    found.push(`left host link ${hostName}`);
    spawnSync('ip', ['link', 'del', hostName]);
  }
  return found;
}
