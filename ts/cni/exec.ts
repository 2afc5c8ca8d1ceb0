// Invoking another CNI plugin (a delegate) the way a runtime does: found by type in CNI_PATH,
// executed with the CNI environment and the network configuration on stdin.
import { accessSync, constants, statSync } from 'node:fs';
import { join } from 'node:path';

import type { Logger } from '../log/logger.ts';
import type { Command } from './environment.ts';
import { CniError, ErrorCode, quote, shorten } from './errors.ts';

/**
 * How many delegations deep this process runs, counted in the environment each delegate gets: a
 * plugin that leads back to netplug (an IPAM type that is netplug under another name) would
 * otherwise run netplug without end, each waiting on the next.
 */
const DELEGATION_DEPTH_VARIABLE = 'NETPLUG_DELEGATION_DEPTH';
/** Deeper than any real chain (netplug, its IPAM plugin, one that plugin delegates to), and small. */
const MAX_DELEGATION_DEPTH = 4;

export interface PluginInvocation {
  /** The plugin's type: its executable's name. */
  type: string;
  command: Command;
  /** CNI_PATH, split. */
  path: readonly string[];
  /** The environment to pass on; CNI_COMMAND is set from `command`. */
  env: Readonly<Record<string, string | undefined>>;
  stdin: Buffer;
  log: Logger;
}

/** The executable for `type` in the first CNI_PATH directory that has one. */
export function findPlugin(type: string, path: readonly string[]): string | undefined {
  if (type.includes('/')) return undefined;
  for (const directory of path) {
    const candidate = join(directory, type);
    try {
      if (statSync(candidate).isFile()) {
        accessSync(candidate, constants.X_OK);
        return candidate;
      }
    } catch {
      // not here
    }
  }
  return undefined;
}

export function pluginMissing(type: string, path: readonly string[]): CniError {
  return new CniError(
    ErrorCode.InvalidConfig,
    `netconf field "ipam.type" names plugin ${quote(type)}, which is not in CNI_PATH (${shorten(path.join(':')) || 'empty'})`,
  );
}

/** Runs the plugin; resolves to its parsed stdout (undefined if empty), rejects with its CNI error. */
export async function execPlugin(invocation: PluginInvocation): Promise<unknown> {
  const { type, command, path, log } = invocation;
  const depth = delegationDepth(invocation.env);
  if (depth >= MAX_DELEGATION_DEPTH) {
    throw new CniError(
      ErrorCode.InvalidConfig,
      `netconf field "ipam.type" names plugin ${quote(type)}, which would run ${depth + 1} delegated plugins deep (${DELEGATION_DEPTH_VARIABLE}=${depth}); netplug allows ${MAX_DELEGATION_DEPTH}: does ${quote(type)} lead back to netplug?`,
    );
  }
  const executable = findPlugin(type, path);
  if (!executable) throw pluginMissing(type, path);
  const env: Record<string, string> = { CNI_COMMAND: command };
  for (const [key, value] of Object.entries(invocation.env)) {
    if (value !== undefined && key !== 'CNI_COMMAND') env[key] = value;
  }
  env[DELEGATION_DEPTH_VARIABLE] = String(depth + 1);
  const { code, stdout, stderr } = await run(executable, env, invocation.stdin);
  for (const line of stderr.split('\n').filter(Boolean)) log.info(`${type}: ${line}`);
  const text = stdout.trim();
  if (code === 0) {
    if (!text) return undefined;
    try {
      return JSON.parse(text);
    } catch {
      throw new CniError(ErrorCode.DecodingFailure, `${type} ${command} printed output that is not JSON: ${text.slice(0, 200)}`);
    }
  }
  const reported = parseCniError(text);
  if (reported) {
    throw new CniError(reported.code, `${type}: ${reported.msg}`, reported.details);
  }
  throw new CniError(
    ErrorCode.IpamFailure,
    `${type} ${command} failed with exit code ${code}`,
    (stderr.trim() || text).slice(-500) || undefined,
  );
}

/** This process's depth in a delegation chain: 0 unless a netplug up the chain set it. */
function delegationDepth(env: Readonly<Record<string, string | undefined>>): number {
  const depth = Number(env[DELEGATION_DEPTH_VARIABLE] ?? 0);
  return Number.isSafeInteger(depth) && depth > 0 ? depth : 0;
}

function parseCniError(text: string): { code: number; msg: string; details?: string } | undefined {
  try {
    const value = JSON.parse(text) as { code?: unknown; msg?: unknown; details?: unknown };
    if (typeof value.code !== 'number' || typeof value.msg !== 'string') return undefined;
    return { code: value.code, msg: value.msg, ...(typeof value.details === 'string' && value.details ? { details: value.details } : {}) };
  } catch {
    return undefined;
  }
}

function run(executable: string, env: Record<string, string>, stdin: Buffer): Promise<{ code: number; stdout: string; stderr: string }> {
  // Loaded here, not at the top: most invocations never run a delegate, and child_process brings
  // net and stream with it (some 5 ms of start-up).
  const { spawn } = process.getBuiltinModule('node:child_process');
  return new Promise((resolve, reject) => {
    const child = spawn(executable, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', (error) => reject(new CniError(ErrorCode.IoFailure, `could not run ${executable}: ${error.message}`)));
    child.on('close', (code, signal) =>
      resolve({
        code: code ?? (signal ? 128 : 1),
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    );
    // A plugin may exit without reading its input; that is its business, not an error here.
    child.stdin.on('error', () => {});
    child.stdin.end(stdin);
  });
}
