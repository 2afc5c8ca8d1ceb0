// Credentials from a kubeconfig user's exec plugin, run as client-go runs one: the command found on
// PATH (or, if it has a slash, relative to the kubeconfig's directory), its args, the process
// environment plus its env, and KUBERNETES_EXEC_INFO (an ExecCredential whose spec says it is not
// interactive and, with provideClusterInfo, describes the cluster). Its stdout must be an
// ExecCredential of the same apiVersion with status.token or a client certificate and key. The
// credential is reused until status.expirationTimestamp; a 401 runs the plugin again.
//
// Nothing the plugin prints reaches a message or a log: stdout holds the credential and stderr is
// discarded, as it may echo one. Loaded only for a user with exec (node:child_process with it).
import { spawn } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, dirname, isAbsolute, resolve } from 'node:path';

import type { Credential, CredentialSource } from './credentials.ts';
import { KubeSettingsError, KubeUnavailableError } from './errors.ts';
import type { ExecSettings } from './exec-config.ts';

/**
 * How long a plugin may run: a cloud provider's CLI takes a second or three; one still running
 * after 15 s is waiting for something (a login prompt no one sees), and the pod's ADD should fail
 * and be retried rather than hang.
 */
const EXEC_TIMEOUT_MS = 15_000;
/** More output than any credential needs means something is wrong. */
const MAX_OUTPUT = 1 << 20;

export interface ExecPlugin {
  settings: ExecSettings;
  /** The kubeconfig's path: named in messages; a command with a slash is relative to its directory. */
  kubeconfig: string;
  user: string;
  /** spec.cluster of KUBERNETES_EXEC_INFO, when the stanza has provideClusterInfo. */
  cluster?: Record<string, unknown>;
  timeoutMs?: number;
}

interface Issued {
  credential: Credential;
  /** Milliseconds since the epoch; undefined: valid until the server refuses it. */
  expires: number | undefined;
}

export class ExecCredentialSource implements CredentialSource {
  readonly suppliesCertificates = true;
  private readonly plugin: ExecPlugin;
  private issued: Issued | undefined;
  /** One run at a time: concurrent requests share it. */
  private running: Promise<Credential> | undefined;

  constructor(plugin: ExecPlugin) {
    this.plugin = plugin;
  }

  current(): Promise<Credential> {
    const issued = this.issued;
    if (issued && (issued.expires === undefined || Date.now() < issued.expires)) return Promise.resolve(issued.credential);
    return this.run();
  }

  renew(used: Credential): Promise<Credential | undefined> {
    // Another request already had it renewed: use that one.
    if (this.issued && this.issued.credential !== used) return this.current();
    return this.run();
  }

  private run(): Promise<Credential> {
    this.running ??= runPlugin(this.plugin).then(
      (issued) => {
        this.issued = issued;
        this.running = undefined;
        return issued.credential;
      },
      (err: unknown) => {
        this.running = undefined;
        throw err;
      },
    );
    return this.running;
  }
}

async function runPlugin(plugin: ExecPlugin): Promise<Issued> {
  const { settings } = plugin;
  const prefix = `${plugin.kubeconfig}: user "${plugin.user}": exec plugin "${settings.command}"`;
  const fail = (message: string) => new KubeSettingsError('kubernetes.kubeconfig', `${prefix} ${message}`);
  const unavailable = (message: string) =>
    new KubeUnavailableError(`${prefix} ${message} (its output is not shown, as it may hold credentials; run it by hand to see why)`);
  const searchPath = process.env['PATH'] ?? '';
  const base = dirname(resolve(plugin.kubeconfig));
  const path = findCommand(settings.command, base, searchPath);
  if (!path) {
    const where = settings.command.includes('/')
      ? `(${resolve(base, settings.command)}) was not found or is not executable`
      : `was not found on PATH (${searchPath})`;
    const hint = settings.installHint ? `: ${settings.installHint.replace(/\s+/g, ' ')}` : '';
    throw fail(`${where}${hint}`);
  }
  const info = {
    apiVersion: settings.apiVersion,
    kind: 'ExecCredential',
    spec: { interactive: false, ...(plugin.cluster ? { cluster: plugin.cluster } : {}) },
  };
  const env = { ...process.env, ...Object.fromEntries(settings.env), KUBERNETES_EXEC_INFO: JSON.stringify(info) };
  const timeoutMs = plugin.timeoutMs ?? EXEC_TIMEOUT_MS;
  let run: Run;
  try {
    run = await runBounded(path, settings.args, env, timeoutMs);
  } catch (err) {
    throw fail(`could not be started: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (run.timedOut) throw unavailable(`did not finish within ${timeoutMs / 1000} s and was killed`);
  if (run.tooLong) throw fail(`printed more than ${MAX_OUTPUT} bytes, which is no ExecCredential`);
  if (run.signal) throw unavailable(`was killed by ${run.signal}`);
  if (run.code !== 0) throw unavailable(`failed with exit code ${run.code}`);
  const issued = parseExecCredential(run.stdout.toString('utf8'), settings.apiVersion, fail);
  if (issued.credential.cert) issued.credential.certOrigin = `${prefix}: status.clientCertificateData and clientKeyData`;
  return issued;
}

/**
 * The credential in a plugin's stdout. Messages never repeat the output, except the apiVersion it
 * claims. A credential already expired is still used for the request that asked for it.
 */
export function parseExecCredential(stdout: string, apiVersion: string, fail: (message: string) => Error): Issued {
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdout);
  } catch {
    throw fail('printed something that is not an ExecCredential (not JSON)');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw fail('printed something that is not an ExecCredential');
  const { apiVersion: returned, kind, status } = parsed as Record<string, unknown>;
  if (kind !== 'ExecCredential') throw fail('printed something that is not an ExecCredential (kind)');
  if (returned !== apiVersion)
    throw fail(`is configured for ${apiVersion} but returned ${typeof returned === 'string' ? returned.slice(0, 80) : 'no apiVersion'}`);
  if (!status || typeof status !== 'object') throw fail('returned no status');
  const { token, clientCertificateData, clientKeyData, expirationTimestamp } = status as Record<string, unknown>;
  const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
  const cert = text(clientCertificateData);
  const key = text(clientKeyData);
  if (Boolean(cert) !== Boolean(key)) throw fail('returned a client certificate without its key, or a key without its certificate');
  if (!text(token) && !cert) throw fail('returned neither status.token nor status.clientCertificateData and clientKeyData');
  let expires: number | undefined;
  if (expirationTimestamp !== undefined && expirationTimestamp !== null) {
    expires = typeof expirationTimestamp === 'string' ? Date.parse(expirationTimestamp) : Number.NaN;
    if (Number.isNaN(expires)) throw fail('returned a status.expirationTimestamp that is not an RFC 3339 time');
  }
  const credential: Credential = {
    ...(text(token) ? { token: text(token) as string } : {}),
    ...(cert && key ? { cert: Buffer.from(cert), key: Buffer.from(key), certOrigin: 'the exec plugin' } : {}),
  };
  return { credential, expires };
}

/** The executable to run: `command` on `searchPath`, or a path (relative to `base`); undefined if none. */
export function findCommand(command: string, base: string, searchPath: string): string | undefined {
  const candidates = command.includes('/')
    ? [isAbsolute(command) ? command : resolve(base, command)]
    : searchPath
        .split(delimiter)
        .filter((dir) => isAbsolute(dir))
        .map((dir) => resolve(dir, command));
  return candidates.find((candidate) => {
    try {
      accessSync(candidate, constants.X_OK);
      return statSync(candidate).isFile();
    } catch {
      return false;
    }
  });
}

interface Run {
  stdout: Buffer;
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  tooLong: boolean;
}

/** Runs `path` without stdin, keeping stdout; killed with its process group after `timeoutMs`. */
function runBounded(path: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Run> {
  return new Promise((resolveRun, reject) => {
    // Its own process group, so that a timeout also ends what the plugin started.
    const child = spawn(path, args, { env, stdio: ['ignore', 'pipe', 'ignore'], detached: true });
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (outcome: Partial<Run>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolveRun({ stdout: Buffer.concat(chunks), code: null, signal: null, timedOut: false, tooLong: false, ...outcome });
    };
    const killGroup = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => {
      killGroup();
      settle({ timedOut: true });
    }, timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_OUTPUT) chunks.push(chunk);
      else {
        killGroup();
        settle({ tooLong: true });
      }
    });
    child.on('error', (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => settle({ code, signal }));
  });
}
