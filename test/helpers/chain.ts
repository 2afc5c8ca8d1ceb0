// Runs a network configuration list (conflist) as libcni does: each plugin gets the list's name
// and cniVersion, runtimeConfig for the capabilities it declares, and the previous result; DEL
// runs in reverse with the cached result. And a TCP service inside a namespace to reach through
// a host port.
import { spawn, spawnSync } from 'node:child_process';
import { connect } from 'node:net';

import type { ExecutionContext } from 'ava';

import { findPlugin } from '../../ts/cni/exec.ts';
import { CNI_PATH, invoke, type Outcome } from './cni.ts';
import type { TestNetns } from './kernel.ts';

export interface Conflist {
  cniVersion: string;
  name: string;
  plugins: Array<Record<string, unknown> & { type: string; capabilities?: Record<string, boolean> }>;
}

export interface Runtime {
  containerId: string;
  netns: string;
  ifname?: string;
  capabilityArgs?: Record<string, unknown>;
}

/** ADD, CHECK or DEL through every plugin; stops at the first failure. */
export function runChain(conflist: Conflist, command: 'ADD' | 'CHECK' | 'DEL', runtime: Runtime, cachedResult?: unknown): Outcome {
  const plugins = command === 'DEL' ? [...conflist.plugins].reverse() : conflist.plugins;
  let previous = cachedResult;
  let last: Outcome = { status: 0, stdout: '', stderr: '', json: undefined };
  for (const { capabilities, ...plugin } of plugins) {
    const runtimeConfig = Object.fromEntries(
      Object.entries(capabilities ?? {})
        .filter(([name, wanted]) => wanted && runtime.capabilityArgs?.[name] !== undefined)
        .map(([name]) => [name, runtime.capabilityArgs?.[name]]),
    );
    const netconf = {
      ...plugin,
      cniVersion: conflist.cniVersion,
      name: conflist.name,
      ...(Object.keys(runtimeConfig).length ? { runtimeConfig } : {}),
      ...(previous !== undefined ? { prevResult: previous } : {}),
    };
    const executable = findPlugin(plugin.type, CNI_PATH.split(':'));
    if (!executable) throw new Error(`plugin ${plugin.type} not in ${CNI_PATH}`);
    last = invoke({
      executable,
      command,
      netconf,
      containerId: runtime.containerId,
      netns: runtime.netns,
      ifname: runtime.ifname ?? 'eth0',
    });
    if (last.status !== 0) return last;
    if (command === 'ADD') previous = last.json;
  }
  return command === 'ADD' ? { ...last, json: previous } : last;
}

/** A TCP server in `netns` that answers every connection with `greeting`; stopped at teardown. */
export async function serveInNamespace(t: ExecutionContext, netns: TestNetns, port: number, greeting: string): Promise<void> {
  const code = `require('net').createServer((s) => s.end(${JSON.stringify(greeting)})).listen(${port}, '0.0.0.0', () => console.log('listening'))`;
  const server = spawn('ip', ['netns', 'exec', netns.name, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    server.kill('SIGKILL');
  });
  await new Promise<void>((resolve, reject) => {
    server.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve());
    server.on('exit', (status) => reject(new Error(`server in ${netns.name} exited with ${status}`)));
  });
}

/** What a TCP connection to host:port receives, or the connection error's code. */
export function fetchTcp(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 3000 });
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString()));
    socket.on('end', () => resolve(data));
    socket.on('timeout', () => {
      socket.destroy();
      resolve('ETIMEDOUT');
    });
    socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/** The host's own address on its default route (what a client elsewhere would connect to). */
export function hostAddress(): string {
  const route = JSON.parse(spawnSync('ip', ['-j', 'route', 'get', '1.1.1.1'], { encoding: 'utf8' }).stdout) as Array<{ prefsrc: string }>;
  return route[0]?.prefsrc ?? '127.0.0.1';
}

/** NAT rules mentioning `text` (portmap tags its rules with the container ID). */
export function natRulesMentioning(text: string): string[] {
  return spawnSync('iptables-save', ['-t', 'nat'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((line) => line.includes(text));
}

let port = 20000 + ((process.pid * 7) % 9000);
/** A host port no concurrently running test uses. */
export function uniqueHostPort(): number {
  return port++;
}
