// netplug-node serving CNI on its socket, on a real etcd and real network namespaces, through a
// TypeScript client of the shim's protocol (test/helpers/agent-client.ts): accept, decline and go;
// a client that gives up before go leaves nothing running; ADD, CHECK and DEL as the one-shot
// does them, with the same results and log lines apart from `via`, time and pid; FAST_PATH=false;
// the socket's modes, a stale socket replaced, and the socket removed at stop.
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import test from 'ava';

import { InflightJournal } from '../../ts/node/cni/inflight-journal.ts';
import { callAgent } from '../helpers/agent-client.ts';
import { ONE_SHOT, spawnAgent } from '../helpers/agent-server.ts';
import { DIST_CNI, invoke, runtimeInput, tempDir } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { addressesOf, etcdKeys, ipamNetconf } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, ip, link } from '../helpers/kernel.ts';
import { startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import { NODE_AGENT_RULES } from './agent.ts';

const POOL = '10.221.0.0/16';
const NODE = 'node-serve';

let kube: Kube;
let etcd: EtcdServer;
let agentEnv: Record<string, string>;
const shared = sharedTeardowns(test);

test.before(async () => {
  kube = await startKube(shared);
  etcd = await startEtcd(shared);
  agentEnv = {
    NODENAME: NODE,
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: (await kube.identityWith('netplug-node-serve', NODE_AGENT_RULES)).kubeconfig,
    NETPLUG_IPV4POOL_CIDR: POOL,
    NETPLUG_NETWORKING_BACKEND: 'none',
  };
});

/** The entries in the agent's journal of unfinished ADDs, by container. */
const journal = (socket: string) =>
  new InflightJournal(join(dirname(socket), 'inflight')).entries().map((found) => found.entry.env['CNI_CONTAINERID']);

const netconf = (extra: Record<string, unknown> = {}) => ipamNetconf(etcd, { node: NODE, name: 'serve', extra });
/** A log line without what differs between two runs of the same command: time, pid and `via`. */
const normalized = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => line.replace(/^\S+ \[(\w+)\]\[\d+\]/, '[$1]').replace(/ via="[^"]*"/, ''));

test.serial('protocol: accept and go, decline what the agent cannot serve, nothing runs without go', async (t) => {
  const agent = await spawnAgent(t, agentEnv);
  t.is(statSync(agent.socket).mode & 0o777, 0o600);
  t.is(statSync(dirname(agent.socket)).mode & 0o777, 0o700);

  const version = await callAgent(agent.socket, { command: 'VERSION' });
  t.true(version.accepted);
  t.is(version.exitCode, 0);
  t.is(version.stdout, invoke({ command: 'VERSION', executable: ONE_SHOT }).stdout);

  const declined = async (call: Parameters<typeof callAgent>[1], options: Parameters<typeof callAgent>[2] = {}) =>
    (await callAgent(agent.socket, call, options)).accepted === false;
  t.true(await declined({ command: 'VERSION' }, { header: Buffer.from('not json') }), 'a first frame that is not JSON');
  t.true(await declined({ command: 'VERSION' }, { program: 'ptp' }), 'a program other than netplug');
  t.true(await declined({ command: 'ADD', netns: '/run/netns/nptest-none-there', netconf: netconf() }), 'a netns the agent cannot see');
  const hostLocal = { ...netconf(), ipam: { type: 'host-local', subnet: '10.221.255.0/24' } };
  // Only a call that runs a plugin from CNI_PATH (delegated IPAM) needs its directories.
  t.true(
    await declined({ command: 'ADD', path: '/nonexistent/cni/bin', netconf: hostLocal }),
    'a CNI_PATH directory the agent cannot see, for an IPAM plugin run from there',
  );
  t.true(
    await declined({ command: 'DEL', netconf: hostLocal }, { pid: 2 ** 30 }),
    'delegated IPAM from a process whose root the agent cannot see',
  );
  t.true(
    await declined({ command: 'DEL', netconf: netconf({ log_file_path: '/nonexistent/netplug/cni.log' }) }),
    'a log directory the agent cannot see',
  );
  const version2 = await callAgent(
    agent.socket,
    { command: 'VERSION' },
    { header: Buffer.from(JSON.stringify({ version: 2, program: 'netplug', pid: 1, env: {} })) },
  );
  t.false(version2.accepted, 'another protocol version');

  // Accepted, then the client gives up: the ADD never starts.
  const netns = createNetns(t, 'gaveup');
  const id = containerId();
  const gaveUp = await callAgent(
    agent.socket,
    { command: 'ADD', containerId: id, netns: netns.path, netconf: netconf() },
    { giveUpBeforeGo: true },
  );
  t.true(gaveUp.accepted);
  t.is(await agent.stop(), 0);
  t.regex(agent.output(), /stopped serving CNI: 2 commands served, 7 requests declined/);
  // Each kind of decline is logged once, for operators, with what it was.
  t.regex(
    agent.output(),
    /declined a CNI request, the shim runs the one-shot: CNI_NETNS \/run\/netns\/nptest-none-there is not visible in netplug-node/,
  );
  t.log(
    agent
      .output()
      .split('\n')
      .find((line) => line.includes('stopped serving CNI')),
  );
  t.false(existsSync(agent.socket), 'the socket is removed at stop');
  t.is(link('eth0', netns), undefined, 'no interface');
  t.deepEqual(await etcdKeys(t, etcd, `/netplug/ipam/v2/handle/serve.${id}`), [], 'no address');
  t.deepEqual(journal(agent.socket), []);
});

test.serial('ADD, CHECK and DEL through the agent: networked, checked, removed; logs as the one-shot writes them', async (t) => {
  const agent = await spawnAgent(t, agentEnv);
  const netns = createNetns(t, 'served');
  const call = { containerId: containerId(), netns: netns.path, netconf: netconf({ log_level: 'debug' }) };
  const add = await callAgent(agent.socket, { ...call, command: 'ADD' });
  t.true(add.accepted);
  t.is(add.exitCode, 0, add.stdout);
  const [address] = addressesOf(add.json);
  t.truthy(address);
  t.true(addresses('eth0', netns).includes(`${address}/32`));
  t.true(ip(['route'], netns).includes('default via 169.254.1.1 dev eth0'));
  t.regex(add.stderr ?? '', /netplug\/add: workload networked .*via="netplug-node"/);
  t.notRegex(add.stderr ?? '', /via="one-shot"/);

  const check = await callAgent(agent.socket, { ...call, command: 'CHECK', netconf: { ...call.netconf, prevResult: add.json } });
  t.is(check.exitCode, 0, check.stdout);
  const del = await callAgent(agent.socket, { ...call, command: 'DEL' });
  t.is(del.exitCode, 0, del.stdout);
  // Each served command is in the agent's latency histogram, by command and result.
  const metrics = await (await fetch(`${agent.health}/metrics`)).text();
  for (const command of ['ADD', 'CHECK', 'DEL'])
    t.regex(metrics, new RegExp(`netplug_cni_request_duration_seconds_count\\{command="${command}",result="success"\\} 1\n`));
  t.is(link('eth0', netns), undefined);
  t.deepEqual(await etcdKeys(t, etcd, `/netplug/ipam/v2/handle/serve.${call.containerId}`), []);

  // The same ADD by the one-shot (the same address asked for): the same result and log lines.
  const args = `IgnoreUnknown=1;IP=${address}`;
  const viaAgent = await callAgent(agent.socket, { ...call, command: 'ADD', args });
  t.is(viaAgent.exitCode, 0, viaAgent.stdout);
  t.is((await callAgent(agent.socket, { ...call, command: 'DEL', args })).exitCode, 0);
  const oneShot = invoke({ ...call, command: 'ADD', args, executable: ONE_SHOT });
  t.is(oneShot.status, 0, oneShot.stdout);
  t.is(viaAgent.stdout, oneShot.stdout);
  t.regex(oneShot.stderr, /via="one-shot"/);
  t.deepEqual(normalized(viaAgent.stderr ?? '').map(withoutTimestamps), normalized(oneShot.stderr).map(withoutTimestamps));

  // A failing ADD (another container's interface is in the way): the same error and the same lines.
  const other = { ...call, containerId: containerId() };
  const failingAgent = await callAgent(agent.socket, { ...other, command: 'ADD' });
  const failingOneShot = invoke({ ...other, command: 'ADD', executable: ONE_SHOT });
  t.is(failingAgent.exitCode, 1);
  t.is(failingOneShot.status, 1);
  t.is(failingAgent.stdout, failingOneShot.stdout);
  t.regex(failingAgent.stdout ?? '', /"code": 101/);
  t.deepEqual(normalized(failingAgent.stderr ?? ''), normalized(failingOneShot.stderr));
  t.is(invoke({ ...call, command: 'DEL', executable: ONE_SHOT }).status, 0);
  t.log(`one ADD through the agent:\n${viaAgent.stderr}one through the one-shot:\n${oneShot.stderr}`);
  t.log(`a failing ADD through the agent:\n${failingAgent.stderr}through the one-shot:\n${failingOneShot.stderr}`);
});

/** Where a descriptor of /proc/<pid>/fd points; undefined for one closed meanwhile. */
function readlinkIfAny(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch {
    return undefined;
  }
}

/** Addresses' allocation times differ between runs. */
const withoutTimestamps = (line: string) => line.replace(/"timestamp":"[^"]*"/g, '"timestamp":…');

test.serial("the netconf's log file: kept open between served commands, followed when another process rotates it away", async (t) => {
  const agent = await spawnAgent(t, agentEnv);
  const dir = tempDir(t, 'agent-log');
  const path = join(dir, 'cni.log');
  const netns = createNetns(t, 'logged');
  const call = { containerId: containerId(), netns: netns.path, netconf: netconf({ log_file_path: path }) };
  const openOnLog = () => readdirSync(`/proc/${agent.pid}/fd`).filter((fd) => readlinkIfAny(`/proc/${agent.pid}/fd/${fd}`) === path);
  const add = await callAgent(agent.socket, { ...call, command: 'ADD' });
  t.is(add.exitCode, 0, add.stdout);
  const check = await callAgent(agent.socket, { ...call, command: 'CHECK', netconf: { ...call.netconf, prevResult: add.json } });
  t.is(check.exitCode, 0, check.stdout);
  t.is(openOnLog().length, 1, 'one descriptor on the log, kept after the commands');
  // A one-shot's rotation: the file renamed aside. The next command writes a fresh file at the path.
  renameSync(path, join(dir, 'cni-2026-01-01T00-00-00.000Z.log'));
  t.is((await callAgent(agent.socket, { ...call, command: 'DEL' })).exitCode, 0);
  t.regex(readFileSync(join(dir, 'cni-2026-01-01T00-00-00.000Z.log'), 'utf8'), /netplug\/add: workload networked .*via="netplug-node"/);
  t.regex(readFileSync(path, 'utf8'), /netplug\/del: workload interface removed .*via="netplug-node"/);
  t.is(openOnLog().length, 1, 'the renamed file closed, the new one open');
});

test.serial('FAST_PATH=false: the agent runs but does not serve; a stale socket is replaced at start', async (t) => {
  const off = await spawnAgent(t, { ...agentEnv, FAST_PATH: 'false' }, { waitServing: false });
  await eventually('the agent says it does not serve', () => off.output().includes('FAST_PATH is false'));
  t.false(existsSync(off.socket));
  t.false((await callAgent(off.socket, { command: 'VERSION' })).accepted);
  t.is(await off.stop(), 0);

  // A socket file left by a killed agent (here a plain file at its path) is replaced.
  mkdirSync(dirname(off.socket), { recursive: true });
  writeFileSync(off.socket, '');
  const on = await spawnAgent(t, agentEnv, { dir: off.dir });
  t.true((await callAgent(on.socket, { command: 'VERSION' })).accepted);
  t.true(statSync(on.socket).isSocket());
});

test.serial('a second agent on the same socket (a rolling update) serves only once the first has stopped', async (t) => {
  const first = await spawnAgent(t, agentEnv);
  const second = await spawnAgent(t, agentEnv, { dir: first.dir, waitServing: false });
  await eventually('the second agent waits', () => second.output().includes('another netplug-node holds'));
  const version = await callAgent(first.socket, { command: 'VERSION' });
  t.true(version.accepted, 'the first one serves meanwhile');
  t.is(await first.stop(), 0);
  await eventually('the second agent serves', () => second.output().includes('serving CNI on'));
  await eventually('it accepts', async () => (await callAgent(second.socket, { command: 'VERSION' })).accepted);
  t.is(await second.stop(), 0);
  t.regex(first.output(), /stopped serving CNI: 2 commands served/);
});

test.serial('through the shim: the agent serves; once it has stopped, the shim runs the one-shot', async (t) => {
  t.true(existsSync(join(DIST_CNI, 'netplug-oneshot')), 'the shim is built as dist/cni/netplug beside netplug-oneshot');
  const agent = await spawnAgent(t, agentEnv);
  const netns = createNetns(t, 'shim');
  const call = { containerId: containerId(), netns: netns.path, netconf: netconf() };
  const env = (command: string) => ({ ...runtimeInput({ ...call, command }).env, NETPLUG_AGENT_SOCKET: agent.socket });
  const add = invoke({ ...call, command: 'ADD', env: env('ADD') });
  t.is(add.status, 0, add.stdout);
  t.regex(add.stderr, /workload networked .*via="netplug-node"/);
  t.true(addresses('eth0', netns).includes(`${addressesOf(add.json)[0]}/32`));
  t.is(await agent.stop(), 0);
  const del = invoke({ ...call, command: 'DEL', env: env('DEL') });
  t.is(del.status, 0, del.stdout);
  t.regex(del.stderr, /via="one-shot"/);
  t.is(link('eth0', netns), undefined);
  t.deepEqual(await etcdKeys(t, etcd, `/netplug/ipam/v2/handle/serve.${call.containerId}`), []);
});
