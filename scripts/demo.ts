// npm run demo: netplug as a runtime drives it, on its embedded default. A throwaway etcd on
// loopback (Debian's etcd-server), a pool made with netplugctl, and two network namespaces as
// pods wired through the built executables with a conflist chaining Debian's portmap: their
// addresses, pod-to-pod traffic through the host, a host port reaching a pod, netplugctl's view,
// then netplug-node enforcing a NetworkPolicy between the pods (lib/demo-policy.ts), then DEL and
// the pool empty again. Everything it makes is removed, also on Ctrl-C.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { policyDemo, type PolicyDemo } from './lib/demo-policy.ts';
import { launchEtcd, type EtcdServer } from './lib/etcd-server.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const NETPLUG = join(ROOT, 'dist/cni/netplug');
const NETPLUGCTL = join(ROOT, 'dist/bin/netplugctl');
const PORTMAP = '/usr/lib/cni/portmap';
const CNI_PATH = `${join(ROOT, 'dist/cni')}:/usr/lib/cni`;
const HOST_PORT = 18000 + (process.pid % 1000);
const NODE_NAME = 'demo-node';
// The policy part runs netplug-node in the host's namespace, whose dispatch drops every interface
// of its prefix that it does not know: a prefix of the demo's own keeps other workloads' `cali`
// interfaces on this host out of its reach. The plugin and the agent take it from the environment.
const INTERFACE_PREFIX = 'demo';

/** The embedded default: the network a runtime would read from /etc/cni/net.d. */
function conflist(etcdEndpoints: string) {
  return {
    cniVersion: '1.0.0',
    name: 'netplug-demo',
    plugins: [
      { type: 'netplug', nodename: NODE_NAME, etcd_endpoints: etcdEndpoints, ipam: { type: 'netplug-ipam' } },
      { type: 'portmap', snat: true, capabilities: { portMappings: true } },
    ],
  };
}

const scratch = mkdtempSync(join(tmpdir(), 'netplug-demo-'));
const pods = ['a', 'b'].map((label) => ({
  label,
  ns: `netplug-demo-${label}-${process.pid}`,
  id: `demo-${label}-${process.pid}`,
  result: undefined as unknown,
  hostEnd: '',
  portMappings: [] as unknown[],
}));
const servers: ChildProcess[] = [];
let etcd: EtcdServer | undefined;
let conf: ReturnType<typeof conflist> | undefined;
let policy: PolicyDemo | undefined;
const hasNetplugTable = () => spawnSync('/usr/sbin/nft', ['list', 'table', 'inet', 'netplug'], { stdio: 'ignore' }).status === 0;
// A table that was there before is a real agent's, which the policy part refuses to touch.
const tableBefore = hasNetplugTable();

function say(text: string): void {
  console.log(`\n${text}`);
}

function show(title: string, file: string, args: string[], env: Record<string, string> = {}): string {
  console.log(`\n$ ${title}`);
  const out = execFileSync(file, args, { encoding: 'utf8', env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...env } }).trimEnd();
  console.log(out);
  return out;
}

/** One plugin of the list, as libcni runs it: the list's name and version, the previous result. */
function runPlugin(
  executable: string,
  plugin: Record<string, unknown>,
  command: string,
  pod: (typeof pods)[number],
  previous?: unknown,
  runtimeConfig?: unknown,
) {
  if (!conf) throw new Error('no network');
  const netconf = {
    ...plugin,
    cniVersion: conf.cniVersion,
    name: conf.name,
    ...(runtimeConfig ? { runtimeConfig } : {}),
    ...(previous ? { prevResult: previous } : {}),
  };
  const run = spawnSync(executable, [], {
    input: JSON.stringify(netconf),
    encoding: 'utf8',
    env: {
      PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
      CNI_COMMAND: command,
      CNI_CONTAINERID: pod.id,
      CNI_NETNS: `/run/netns/${pod.ns}`,
      CNI_IFNAME: 'eth0',
      CNI_PATH,
      FELIX_INTERFACEPREFIX: INTERFACE_PREFIX,
    },
  });
  if (run.status !== 0) throw new Error(`${executable} ${command} failed: ${run.stdout}${run.stderr}`);
  return run.stdout.trim() ? JSON.parse(run.stdout) : undefined;
}

const [netplugConf, portmapConf] = [0, 1].map((i) => () => {
  const { capabilities: _, ...plugin } = conf!.plugins[i] as Record<string, unknown>;
  return plugin;
}) as [() => Record<string, unknown>, () => Record<string, unknown>];

function add(pod: (typeof pods)[number], portMappings?: unknown[]): unknown {
  const result = runPlugin(NETPLUG, netplugConf(), 'ADD', pod);
  pod.hostEnd = (result as { interfaces: { name: string }[] }).interfaces[0]?.name ?? '';
  pod.portMappings = portMappings ?? [];
  pod.result = runPlugin(PORTMAP, portmapConf(), 'ADD', pod, result, { portMappings: pod.portMappings });
  return pod.result;
}

function del(pod: (typeof pods)[number]): void {
  if (!pod.result) return;
  // With the ADD's port mappings, as the runtime passes them: portmap removes nothing for a DEL without any.
  runPlugin(PORTMAP, portmapConf(), 'DEL', pod, pod.result, { portMappings: pod.portMappings });
  runPlugin(NETPLUG, netplugConf(), 'DEL', pod, pod.result);
  pod.result = undefined;
}

function fetchTcp(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    const socket = connect({ host, port }, () => undefined);
    socket.setTimeout(3000, () => socket.destroy());
    socket.on('data', (chunk) => (data += chunk));
    socket.on('close', () => resolve(data));
    socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/** A TCP server in the pod's namespace answering `greeting`. */
async function serve(pod: (typeof pods)[number], port: number, greeting: string): Promise<void> {
  const code = `require('net').createServer((s) => s.end(${JSON.stringify(greeting)})).listen(${port}, '0.0.0.0', () => console.log('up'))`;
  const server = spawn('ip', ['netns', 'exec', pod.ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  servers.push(server);
  await new Promise<void>((resolve) => server.stdout?.once('data', () => resolve()));
}

let cleaned: Promise<void> | undefined;
/** DEL what was added, then the namespaces, the servers, etcd and the scratch directory. */
function cleanUp(): Promise<void> {
  cleaned ??= (async () => {
    await policy?.stop();
    for (const server of servers) server.kill('SIGKILL');
    for (const pod of pods) {
      try {
        del(pod);
      } catch (err) {
        console.error(`cleaning up pod ${pod.label}: ${(err as Error).message}`);
      }
      spawnSync('ip', ['netns', 'del', pod.ns]);
    }
    await etcd?.stop();
    rmSync(scratch, { recursive: true, force: true });
  })();
  return cleaned;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.log(`\n${signal}: removing what the demo made`);
    void cleanUp().finally(() => process.exit(130));
  });
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root: the demo creates network namespaces');
  console.log('netplug demo: two pods on a netplug network with netplug-ipam on etcd, chained with portmap');
  etcd = await launchEtcd(join(scratch, 'etcd'));
  conf = conflist(etcd.endpoints);
  say(
    `a throwaway etcd (Debian's etcd-server) listens on ${etcd.endpoints}; the network configuration list:\n${JSON.stringify(conf, null, 2)}`,
  );
  const ctlEnv = { ETCD_ENDPOINTS: etcd.endpoints };
  show(
    'netplugctl pool create demo-pool --cidr 10.123.0.0/16',
    NETPLUGCTL,
    ['pool', 'create', 'demo-pool', '--cidr', '10.123.0.0/16'],
    ctlEnv,
  );

  for (const pod of pods) execFileSync('ip', ['netns', 'add', pod.ns]);
  const [a, b] = pods as [(typeof pods)[number], (typeof pods)[number]];
  add(a);
  add(b, [{ hostPort: HOST_PORT, containerPort: 8080, protocol: 'tcp' }]);
  const addressOf = (pod: (typeof pods)[number]) =>
    ((pod.result as { ips: { address: string }[] }).ips[0]?.address ?? '').split('/')[0] ?? '';
  for (const pod of pods) {
    const result = pod.result as { ips: { address: string }[]; interfaces: { name: string; mac?: string }[] };
    say(
      `pod ${pod.label} (ADD through netplug, then portmap): ${result.ips.map((ip) => ip.address).join(', ')} on eth0 (${result.interfaces[1]?.mac}), host end ${result.interfaces[0]?.name}`,
    );
  }
  show(`ip -n ${a.ns} route`, 'ip', ['-n', a.ns, 'route']);
  show(`pod a pings pod b (${addressOf(b)}) through the host`, 'ip', ['netns', 'exec', a.ns, 'ping', '-c', '2', '-W', '2', addressOf(b)]);
  await serve(b, 8080, 'hello from pod b');
  const viaHostPort = await fetchTcp('127.0.0.1', HOST_PORT);
  say(`the host's port ${HOST_PORT} reaches pod b's port 8080 (portmap): "${viaHostPort}"`);
  if (viaHostPort !== 'hello from pod b') throw new Error(`the host port answered "${viaHostPort}"`);
  show('netplugctl ipam show', NETPLUGCTL, ['ipam', 'show'], ctlEnv);
  show(`netplugctl ipam show --ip ${addressOf(b)}`, NETPLUGCTL, ['ipam', 'show', '--ip', addressOf(b)], ctlEnv);

  say('network policy: netplug-node follows the workload endpoints the ADDs wrote to etcd');
  policy = policyDemo(scratch, etcd.endpoints, NODE_NAME, INTERFACE_PREFIX);
  const podOf = (pod: (typeof pods)[number]) => ({ ns: pod.ns, id: pod.id, address: addressOf(pod) });
  await policy.run(podOf(a), podOf(b), 8080);

  for (const pod of pods) del(pod);
  say('DEL through portmap, then netplug, for both pods');
  show('netplugctl ipam show  (the pool is empty again)', NETPLUGCTL, ['ipam', 'show'], ctlEnv);
  show('netplugctl ipam check', NETPLUGCTL, ['ipam', 'check', '--grace-period', '0'], ctlEnv);
}

try {
  await main();
} finally {
  await cleanUp();
  const namespaces = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((line) => pods.some((pod) => line.startsWith(pod.ns)));
  const links = pods.filter((pod) => pod.hostEnd && spawnSync('ip', ['link', 'show', pod.hostEnd]).status === 0).map((pod) => pod.hostEnd);
  const table = !tableBefore && hasNetplugTable() ? ['table inet netplug'] : [];
  const nat = spawnSync('iptables-save', ['-t', 'nat'], { encoding: 'utf8' }).stdout ?? '';
  const portmap = pods.filter((pod) => nat.includes(`id: \\"${pod.id}\\"`)).map((pod) => `portmap's rules for ${pod.id}`);
  const left = [...namespaces, ...links, ...table, ...portmap];
  console.log(
    left.length === 0
      ? '\nremoved the pods, their namespaces and port mappings, netplug-node and its table, etcd and its data: nothing left behind'
      : `\nleft behind (unexpected): ${left.join(', ')}`,
  );
}
