// When netplug-node declines a CNI request and the shim runs the one-shot plugin instead: whenever
// the agent could not serve it exactly as the one-shot would on the host. Declining is always safe,
// so any doubt declines. Each decline has a kind (a metric's label, and what readiness reports when
// one that means a setting is wrong keeps happening: see DeclineLog in decline-log.ts).
import { readFileSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

export type DeclineKind =
  | 'malformed'
  | 'starting'
  | 'rolling-back'
  | 'stopping'
  | 'journal'
  | 'netns-not-visible'
  | 'netns-in-use'
  | 'pid-namespace'
  | 'cni-path-not-visible'
  | 'proxy-differs'
  | 'delegated-ipam'
  | 'log-dir-not-visible'
  | 'kubeconfig-not-visible';

export interface Decline {
  kind: DeclineKind;
  reason: string;
}

/**
 * Kinds that say the agent's container does not show what the host's calls need (a directory the
 * DaemonSet does not mount at the host's path, other proxy settings): each keeps happening until a
 * setting is fixed, and every call it declines costs a one-shot.
 */
export const MISCONFIGURED: ReadonlySet<DeclineKind> = new Set([
  'cni-path-not-visible',
  'log-dir-not-visible',
  'kubeconfig-not-visible',
  'proxy-differs',
  'pid-namespace',
  'journal',
]);

export interface CniRequest {
  version: number;
  program: 'netplug' | 'netplug-ipam';
  /** The shim's pid, in the shim's PID namespace. */
  pid: number;
  env: Record<string, string>;
}

/** The shim's first frame as a request, or why it is not one. */
export function parseRequest(bytes: Buffer): CniRequest | string {
  let header: unknown;
  try {
    header = JSON.parse(bytes.toString('utf8'));
  } catch {
    return 'the first frame is not JSON';
  }
  const { version, program, pid, env } = (header ?? {}) as Record<string, unknown>;
  if (version !== 1) return `protocol version ${JSON.stringify(version)} is not 1`;
  if (program !== 'netplug' && program !== 'netplug-ipam') return `program ${JSON.stringify(program)} is not netplug or netplug-ipam`;
  if (!Number.isSafeInteger(pid) || (pid as number) <= 0) return `pid ${JSON.stringify(pid)} is not a process id`;
  if (typeof env !== 'object' || env === null || Object.values(env).some((v) => typeof v !== 'string'))
    return 'env is not an object of strings';
  return { version, program, pid: pid as number, env: env as Record<string, string> };
}

/** Proxy variables the plugin's HTTP clients follow: read from the agent's own environment. */
const PROXY_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'];

/**
 * Why the agent cannot serve `request` as the one-shot would, or undefined when it can: the
 * network namespace (unless the shim sent it, `netnsSent`) or a file the call uses is not visible
 * here, the shim runs in another PID namespace (a /proc/<pid>/ns/net path would name another
 * process's namespace), the proxy settings differ from the agent's, or the netconf needs files the
 * agent may not share (below). What the call does not use (CNI_PATH, when netplug-ipam runs inside
 * the agent) is not asked for.
 */
export function declineReason(request: CniRequest, stdin: Buffer, agentEnv: NodeJS.ProcessEnv, netnsSent = false): Decline | undefined {
  const { env } = request;
  const netns = env['CNI_NETNS'];
  if (netns && !netnsSent) {
    if (!netns.startsWith('/')) return { kind: 'netns-not-visible', reason: `CNI_NETNS "${netns}" is not an absolute path` };
    if (!exists(netns)) return { kind: 'netns-not-visible', reason: `CNI_NETNS ${netns} is not visible in netplug-node` };
    if (netns.startsWith('/proc/') && !sameProcess(request))
      return { kind: 'pid-namespace', reason: `the shim's process ${request.pid} is not visible in netplug-node (another PID namespace)` };
  }
  for (const name of PROXY_VARIABLES) {
    if ((env[name] ?? '') !== (agentEnv[name] ?? ''))
      return { kind: 'proxy-differs', reason: `${name} differs between the runtime and netplug-node` };
  }
  return filesystemReason(request, stdin);
}

/**
 * What the netconf asks of the filesystem that a containerized agent may not share with the host.
 * A delegated IPAM plugin (host-local keeps its state in files) runs only where the agent's root
 * is the shim's, and from CNI_PATH, whose directories must then be there; a log file only where
 * its directory is there; a kubeconfig (an ADD's reads of its pod) only where the file is. A netconf that
 * does not parse is served: the core reports it as the one-shot would.
 */
function filesystemReason(request: CniRequest, stdin: Buffer): Decline | undefined {
  let netconf: { ipam?: { type?: unknown }; log_file_path?: unknown; kubernetes?: { kubeconfig?: unknown } };
  try {
    netconf = JSON.parse(stdin.toString('utf8')) ?? {};
  } catch {
    return undefined;
  }
  if (typeof netconf !== 'object') return undefined;
  const ipam = netconf.ipam?.type;
  if (typeof ipam === 'string' && ipam !== 'netplug-ipam') {
    if (!sameRoot(request.pid))
      return {
        kind: 'delegated-ipam',
        reason: `IPAM plugin "${ipam}" keeps its state on the host, whose filesystem netplug-node does not share`,
      };
    for (const dir of (request.env['CNI_PATH'] ?? '').split(':').filter(Boolean)) {
      if (!isDirectory(dir)) return { kind: 'cni-path-not-visible', reason: `CNI_PATH directory ${dir} is not visible in netplug-node` };
    }
  }
  const logFile = netconf.log_file_path;
  if (typeof logFile === 'string' && logFile.startsWith('/') && !isDirectory(dirname(logFile)))
    return { kind: 'log-dir-not-visible', reason: `the log file's directory ${dirname(logFile)} is not visible in netplug-node` };
  // Only an ADD reads from the Kubernetes API (the pod), with the netconf's credentials.
  const kubeconfig = request.env['CNI_COMMAND'] === 'ADD' ? netconf.kubernetes?.kubeconfig : undefined;
  if (typeof kubeconfig === 'string' && kubeconfig.startsWith('/') && !exists(kubeconfig))
    return { kind: 'kubeconfig-not-visible', reason: `the kubeconfig ${kubeconfig} is not visible in netplug-node` };
  return undefined;
}

/** Whether the shim's root directory is the agent's (the same mount namespace's view). */
function sameRoot(pid: number): boolean {
  try {
    const theirs = statSync(`/proc/${pid}/root/`);
    const ours = statSync('/');
    return theirs.dev === ours.dev && theirs.ino === ours.ino;
  } catch {
    return false;
  }
}

/** Whether /proc/<pid> here is the shim: its environment names the same container. */
function sameProcess({ pid, env }: CniRequest): boolean {
  try {
    const entries = readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
    return entries.includes(`CNI_CONTAINERID=${env['CNI_CONTAINERID'] ?? ''}`) && entries.includes(`CNI_NETNS=${env['CNI_NETNS'] ?? ''}`);
  } catch {
    return false;
  }
}

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
