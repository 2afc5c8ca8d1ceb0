// When netplug-node declines a CNI request and the shim runs the one-shot plugin instead: whenever
// the agent could not serve it exactly as the one-shot would on the host. Declining is always safe,
// so any doubt declines.
import { readFileSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

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
 * network namespace or a plugin directory it names is not visible here, the shim runs in another
 * PID namespace (a /proc/<pid>/ns/net path would name another process's namespace), the proxy
 * settings differ from the agent's, or the netconf needs files the agent may not share (below).
 */
export function declineReason(request: CniRequest, stdin: Buffer, agentEnv: NodeJS.ProcessEnv): string | undefined {
  const { env } = request;
  const netns = env['CNI_NETNS'];
  if (netns) {
    if (!netns.startsWith('/')) return `CNI_NETNS "${netns}" is not an absolute path`;
    if (!exists(netns)) return `CNI_NETNS ${netns} is not visible in netplug-node`;
    if (netns.startsWith('/proc/') && !sameProcess(request))
      return `the shim's process ${request.pid} is not visible in netplug-node (another PID namespace)`;
  }
  for (const dir of (env['CNI_PATH'] ?? '').split(':').filter(Boolean)) {
    if (!isDirectory(dir)) return `CNI_PATH directory ${dir} is not visible in netplug-node`;
  }
  for (const name of PROXY_VARIABLES) {
    if ((env[name] ?? '') !== (agentEnv[name] ?? '')) return `${name} differs between the runtime and netplug-node`;
  }
  return filesystemReason(request, stdin);
}

/**
 * What the netconf asks of the filesystem that a containerized agent may not share with the host.
 * A delegated IPAM plugin (host-local keeps its state in files) runs only where the agent's root
 * is the shim's; a log file only where its directory is there. A netconf that does not parse is
 * served: the core reports it as the one-shot would.
 */
function filesystemReason(request: CniRequest, stdin: Buffer): string | undefined {
  let netconf: { ipam?: { type?: unknown }; log_file_path?: unknown };
  try {
    netconf = JSON.parse(stdin.toString('utf8')) ?? {};
  } catch {
    return undefined;
  }
  if (typeof netconf !== 'object') return undefined;
  const ipam = netconf.ipam?.type;
  if (typeof ipam === 'string' && ipam !== 'netplug-ipam' && !sameRoot(request.pid))
    return `IPAM plugin "${ipam}" keeps its state on the host, whose filesystem netplug-node does not share`;
  const logFile = netconf.log_file_path;
  if (typeof logFile === 'string' && logFile.startsWith('/') && !isDirectory(dirname(logFile)))
    return `the log file's directory ${dirname(logFile)} is not visible in netplug-node`;
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
