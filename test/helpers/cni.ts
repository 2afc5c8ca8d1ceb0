// Runs the built plugin executables the way a container runtime does: a fresh process with the
// CNI environment and the netconf on stdin, judged by exit code, stdout and kernel state.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { ExecutionContext } from 'ava';

export const ROOT = new URL('../../', import.meta.url).pathname;
export const DIST_CNI = join(ROOT, 'dist/cni');
export const NETPLUG = join(DIST_CNI, 'netplug');
/** Debian's containernetworking-plugins: host-local, portmap, ptp. */
export const SYSTEM_CNI = '/usr/lib/cni';
export const CNI_PATH = `${DIST_CNI}:${SYSTEM_CNI}`;
export const ALL_VERSIONS = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;

/** The executables are built by `npm test` before the tests run; fail clearly if they are not. */
export function requireBuilt(): void {
  if (!existsSync(NETPLUG)) throw new Error(`${NETPLUG} is missing: run npm run build (npm test does)`);
}

export interface Invocation {
  command: string;
  netconf?: unknown;
  /** Raw stdin instead of a netconf object. */
  stdin?: string;
  containerId?: string;
  netns?: string;
  ifname?: string;
  args?: string;
  path?: string;
  /** Replaces the environment entirely when given. */
  env?: Record<string, string>;
  executable?: string;
}

export interface Outcome {
  status: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed, if it is JSON. */
  json: any;
}

/**
 * Agent mode (test/node/cni-suite-via-agent.test.ts): with NETPLUG_TEST_AGENT_SOCKET set, every
 * invocation's environment names that netplug-node's socket, so the `netplug` shim hands the
 * command to it rather than to the one-shot.
 */
export const AGENT_SOCKET = process.env['NETPLUG_TEST_AGENT_SOCKET'];
/** What agent mode adds to a runtime's environment (nothing otherwise). */
export const AGENT_ENV: Record<string, string> = AGENT_SOCKET ? { NETPLUG_AGENT_SOCKET: AGENT_SOCKET } : {};

/** The environment a runtime gives the plugin for `call`, and the stdin. */
export function runtimeInput(call: Invocation): { env: Record<string, string>; input: string } {
  const given: Record<string, string> = call.env ?? {
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    CNI_COMMAND: call.command,
    CNI_CONTAINERID: call.containerId ?? 'test',
    CNI_NETNS: call.netns ?? '',
    CNI_IFNAME: call.ifname ?? 'eth0',
    CNI_PATH: call.path ?? CNI_PATH,
    ...(call.args !== undefined ? { CNI_ARGS: call.args } : {}),
  };
  const env = { ...given, ...AGENT_ENV };
  return { env, input: call.stdin ?? (call.netconf === undefined ? '' : JSON.stringify(call.netconf)) };
}

export function invoke(call: Invocation): Outcome {
  requireBuilt();
  const { env, input } = runtimeInput(call);
  // A hung plugin must fail its test, not stall the suite.
  const run = spawnSync(call.executable ?? NETPLUG, [], { env, input, encoding: 'utf8', timeout: 60_000, killSignal: 'SIGKILL' });
  let json: unknown;
  try {
    json = run.stdout.trim() ? JSON.parse(run.stdout) : undefined;
  } catch {
    json = undefined;
  }
  return { status: run.status, stdout: run.stdout, stderr: run.stderr, json };
}

/** A temporary directory removed at teardown. */
export function tempDir(t: Pick<ExecutionContext, 'teardown'>, label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `nptest-${label}-${process.pid}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A netconf for netplug with host-local IPAM keeping its state in `dataDir`. */
export function hostLocalNetconf(options: {
  version: string;
  name?: string;
  dataDir: string;
  subnet?: string;
  ranges?: unknown;
  routes?: unknown;
  extra?: Record<string, unknown>;
}): Record<string, unknown> {
  return {
    cniVersion: options.version,
    name: options.name ?? 'netplug-test',
    type: 'netplug',
    ipam: {
      type: 'host-local',
      dataDir: options.dataDir,
      ranges: options.ranges ?? [[{ subnet: options.subnet ?? '10.96.0.0/24' }]],
      ...(options.routes ? { routes: options.routes } : {}),
    },
    ...options.extra,
  };
}

/** The addresses host-local holds for network `name` (its files named after addresses). */
export function reservations(dataDir: string, name = 'netplug-test'): string[] {
  const dir = join(dataDir, name);
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((file) => isIP(file) !== 0);
}

/** No Node.js stack frames: bad input never shows a stack trace. */
export function hasStackTrace(text: string): boolean {
  return /\n\s+at .+\(.+:\d+:\d+\)/.test(text) || /^\s+at .+:\d+:\d+$/m.test(text);
}

/** The host-side veth netplug makes for an attachment outside Kubernetes. */
export function hostVeth(containerId: string, ifname = 'eth0'): string {
  return `cali${createHash('sha1').update(`${containerId}/${ifname}`).digest('hex').slice(0, 11)}`;
}
