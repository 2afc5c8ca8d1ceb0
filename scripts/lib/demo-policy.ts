// The demo's policy part: netplug-node on the demo's etcd with NETPLUG_POLICY_ENFORCEMENT=true, in
// the host's namespace where the demo's pods have their host ends. It follows the workload
// endpoints the plugin's ADDs wrote; a NetworkPolicy applied with netplugctl denies pod a's TCP to
// pod b, `explain pod` names it, and deleting it lets a in again. The agent, its table and its
// files go in stop(), also on Ctrl-C.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { freePort } from './etcd-server.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const NETPLUG_NODE = join(ROOT, 'dist/bin/netplug-node');
const NETPLUGCTL = join(ROOT, 'dist/bin/netplugctl');
const PATH = '/usr/sbin:/usr/bin:/sbin:/bin';
// Debian's nft: under npm, node_modules/.bin has an unrelated `nft` (node-file-trace) first on PATH.
const NFT = '/usr/sbin/nft';

interface DemoPod {
  ns: string;
  /** The container ID: outside Kubernetes, the pod's name in `netplugctl explain pod default/<id>`. */
  id: string;
  address: string;
}

export interface PolicyDemo {
  run(a: DemoPod, b: DemoPod, port: number): Promise<void>;
  /** Stops the agent and deletes its table; safe to call twice, or before run. */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One new TCP connection from the pod's namespace: what the server said, or why there was none. */
function tcpFrom(pod: DemoPod, host: string, port: number): string {
  const script = `const s = require('net').connect(${port}, ${JSON.stringify(host)}); let d = '';
s.setTimeout(1500, () => { console.log('timed out (dropped)'); process.exit(); });
s.on('data', (c) => (d += c)); s.on('end', () => { console.log('"' + d + '"'); process.exit(); });
s.on('error', (e) => { console.log(e.code); process.exit(); });`;
  const run = spawnSync('ip', ['netns', 'exec', pod.ns, process.execPath, '-e', script], { encoding: 'utf8', timeout: 10_000 });
  return run.stdout.trim() || `no answer (${run.stderr.trim()})`;
}

/** Polls `check` until it is true; the agent applies what etcd's watch brings within moments. */
async function until(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

export function policyDemo(scratch: string, etcdEndpoints: string, nodeName: string, interfacePrefix: string): PolicyDemo {
  const dir = join(scratch, 'node');
  const statusDir = join(dir, 'run', 'endpoint-status');
  const ctlEnv = { PATH, ETCD_ENDPOINTS: etcdEndpoints };
  let agent: ChildProcess | undefined;
  let tableOurs = false;

  const show = (title: string, file: string, args: string[], env: Record<string, string> = { PATH }): string => {
    console.log(`\n$ ${title}`);
    const out = execFileSync(file, args, { encoding: 'utf8', env }).trimEnd();
    console.log(out);
    return out;
  };
  const ctlApply = (title: string, name: string, yaml: string) => {
    const file = join(scratch, name);
    writeFileSync(file, yaml);
    console.log(`\n$ cat ${name}\n${yaml.trimEnd()}`);
    show(`netplugctl apply -f ${name}  (${title})`, NETPLUGCTL, ['apply', '-f', file], ctlEnv);
  };
  const tableListing = () => spawnSync(NFT, ['list', 'table', 'inet', 'netplug'], { encoding: 'utf8' });

  async function stop(): Promise<void> {
    const running = agent;
    agent = undefined;
    if (running && running.exitCode === null && running.signalCode === null) {
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGTERM');
      const killer = setTimeout(() => running.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    }
    // A stopped agent leaves its table in place (it fails closed); the demo's goes with it.
    if (tableOurs) spawnSync(NFT, ['delete', 'table', 'inet', 'netplug']);
    tableOurs = false;
  }

  async function run(a: DemoPod, b: DemoPod, port: number): Promise<void> {
    // In the host's namespace there is one `inet netplug`: a real node's agent may own it already.
    if (tableListing().status === 0)
      throw new Error("this host has an nftables table inet netplug already (a netplug-node's): not touching it");
    // Outside Kubernetes the plugin names the endpoint's profile after the network; the agent
    // drops what no policy or profile allows, so the network's profile allows all.
    ctlApply(
      "the network's profile: what its pods allow when no policy selects them",
      'profile.yaml',
      `apiVersion: projectnet.org/v3
kind: Profile
metadata: {name: netplug-demo}
spec:
  ingress: [{action: Allow}]
  egress: [{action: Allow}]
`,
    );
    mkdirSync(dir, { recursive: true });
    const healthPort = await freePort();
    const env = {
      PATH,
      NODENAME: nodeName,
      DATASTORE_TYPE: 'etcdv3',
      ETCD_ENDPOINTS: etcdEndpoints,
      NO_DEFAULT_POOLS: 'true',
      NETPLUG_NETWORKING_BACKEND: 'none',
      NETPLUG_POLICY_ENFORCEMENT: 'true',
      FELIX_INTERFACEPREFIX: interfacePrefix,
      NETPLUG_VAR_DIR: dir,
      NETPLUG_AGENT_SOCKET: join(dir, 'run', 'cni.sock'),
      NETPLUG_ENDPOINT_STATUS_PATH_PREFIX: join(dir, 'run'),
      NETPLUG_HEALTH_ADDR: `127.0.0.1:${healthPort}`,
    };
    tableOurs = true;
    agent = spawn(NETPLUG_NODE, [], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    agent.stderr?.setEncoding('utf8').on('data', (text: string) => (log += text));
    console.log(
      `\nnetplug-node runs on node "${nodeName}" with NETPLUG_POLICY_ENFORCEMENT=true, NETPLUG_NETWORKING_BACKEND=none (pid ${agent.pid}, files in ${dir})`,
    );
    const filed = () => existsSync(statusDir) && readdirSync(statusDir).length >= 2;
    await until('the agent to program both pods', () => {
      if (agent?.exitCode !== null) throw new Error(`netplug-node exited: ${log.split('\n').slice(-10).join('\n')}`);
      return filed();
    }).catch((err: Error) => {
      throw new Error(`${err.message}\n${log.split('\n').slice(-15).join('\n')}`);
    });
    const listing = tableListing().stdout;
    const map = /^[ \t]*map to-wl \{[\s\S]*?^[ \t]*\}/m.exec(listing)?.[0] ?? listing.split('\n').slice(0, 8).join('\n');
    console.log(`\n$ nft list table inet netplug  (the dispatch map of pods' host ends: ${listing.split('\n').length} lines in all)`);
    console.log(map.replace(/^\t/gm, ''));
    say(`pod a connects to pod b's port ${port}: ${tcpFrom(a, b.address, port)}`);

    ctlApply(
      "pod b's ingress from pod a denied, everything else allowed",
      'deny-a-to-b.yaml',
      `apiVersion: projectnet.org/v3
kind: NetworkPolicy
metadata: {name: deny-a-to-b, namespace: default}
spec:
  selector: projectnet.org/network == "netplug-demo"
  ingress:
    - action: Deny
      protocol: TCP
      source: {nets: [${a.address}/32]}
      destination: {nets: [${b.address}/32]}
    - action: Allow
`,
    );
    let denied = '';
    await until('the policy to deny a → b', () => {
      denied = tcpFrom(a, b.address, port);
      return !denied.startsWith('"');
    });
    say(`pod a connects to pod b's port ${port}: ${denied}`);
    show(
      `netplugctl explain pod default/${b.id} --peer ${a.address} --port ${port}/TCP --direction ingress`,
      NETPLUGCTL,
      ['explain', 'pod', `default/${b.id}`, '--peer', a.address, '--port', `${port}/TCP`, '--direction', 'ingress'],
      ctlEnv,
    );
    show(
      'netplugctl delete networkpolicy deny-a-to-b -n default',
      NETPLUGCTL,
      ['delete', 'networkpolicy', 'deny-a-to-b', '-n', 'default'],
      ctlEnv,
    );
    let allowed = '';
    await until('a → b allowed again', () => {
      allowed = tcpFrom(a, b.address, port);
      return allowed.startsWith('"');
    });
    say(`pod a connects to pod b's port ${port} again: ${allowed}`);
    await stop();
    say('netplug-node stopped, its table inet netplug deleted');
  }

  return { run, stop };
}

function say(text: string): void {
  console.log(`\n${text}`);
}
