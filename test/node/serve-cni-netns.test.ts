// netplug-node without a view of the host's network namespaces (as its container has none when
// the host's mounts do not propagate): the shim opens CNI_NETNS on the host and sends it beside the
// request, and the agent works on that. A request without it (a shim of an earlier release) is
// declined as before, and the one-shot serves it. Declines that mean a setting is wrong show on
// /readyz and are counted by reason on /metrics. An unfinished ADD whose namespace a restarted
// agent cannot see is left to the runtime's DEL. Asked, the agent says where each call's time went.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import test from 'ava';

import { callAgent } from '../helpers/agent-client.ts';
import { agentMetric, spawnAgent } from '../helpers/agent-server.ts';
import { DIST_CNI, invoke, runtimeInput, tempDir } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { addressesOf, etcdKeys, ipamNetconf } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, link } from '../helpers/kernel.ts';
import { startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { InflightJournal } from '../../ts/node/cni/inflight-journal.ts';
import { NODE_AGENT_RULES } from './agent.ts';

const POOL = '10.228.0.0/16';
const NODE = 'node-netns';
/** Where the tests' namespaces are mounted: hidden from the agent. */
const NETNS_DIR = '/run/netns';

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
    KUBECONFIG: (await kube.identityWith('netplug-node-netns', NODE_AGENT_RULES)).kubeconfig,
    NETPLUG_IPV4POOL_CIDR: POOL,
    NETPLUG_NETWORKING_BACKEND: 'none',
  };
});

const netconf = (extra: Record<string, unknown> = {}) => ipamNetconf(etcd, { node: NODE, name: 'netns', extra });

test.serial('through the shim, an agent that cannot see the namespace serves ADD, CHECK and DEL on the one the shim sent', async (t) => {
  t.true(existsSync(join(DIST_CNI, 'netplug-oneshot')), 'dist/cni/netplug is the shim (npm run build)');
  const timings = join(tempDir(t, 'timings'), 'cni-timings.jsonl');
  const agent = await spawnAgent(t, { ...agentEnv, NETPLUG_CNI_TIMINGS_FILE: timings }, { hide: [NETNS_DIR] });
  // Made after the agent started, as a pod's is.
  const netns = createNetns(t, 'unseen');
  const call = { containerId: containerId(), netns: netns.path, netconf: netconf() };
  const env = (command: string) => ({ ...runtimeInput({ ...call, command }).env, NETPLUG_AGENT_SOCKET: agent.socket });

  const add = invoke({ ...call, command: 'ADD', env: env('ADD') });
  t.is(add.status, 0, add.stdout);
  t.regex(add.stderr, /workload networked .*via="netplug-node"/);
  t.is(add.json.interfaces[1].sandbox, netns.path, 'the result names the path the runtime gave');
  const [address] = addressesOf(add.json);
  t.true(addresses('eth0', netns).includes(`${address}/32`));
  const check = invoke({ ...call, command: 'CHECK', env: env('CHECK'), netconf: { ...call.netconf, prevResult: add.json } });
  t.is(check.status, 0, check.stdout);
  const del = invoke({ ...call, command: 'DEL', env: env('DEL') });
  t.is(del.status, 0, del.stdout);
  t.regex(del.stderr, /via="netplug-node"/);
  t.is(link('eth0', netns), undefined, 'removed from the namespace the agent never saw');
  // Where each command's time went, as NETPLUG_CNI_TIMINGS_FILE asked (the benchmark's breakdown).
  const timed = readFileSync(timings, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
  const added = timed.find((entry) => entry.command === 'ADD' && entry.container === call.containerId);
  t.truthy(added, JSON.stringify(timed));
  t.true(added.accepted <= added.read && added.read <= added.go && added.go <= added.answered, JSON.stringify(added));
  t.true(added.datastoreMs > 0 && added.kernelMs > 0 && added.kernelAloneMs <= added.kernelMs, JSON.stringify(added));
  t.true(added.datastoreMs + added.kernelAloneMs <= added.answered - added.go, JSON.stringify(added));
  t.deepEqual(await etcdKeys(t, etcd, `/netplug/ipam/v2/handle/netns.${call.containerId}`), []);

  // Without the descriptor (a shim of an earlier release) the agent cannot serve it: declined.
  const plain = await callAgent(agent.socket, { ...call, containerId: containerId(), command: 'ADD' });
  t.false(plain.accepted);
  t.is(await agent.stop(), 0);
  // ADD, CHECK and DEL, and the VERSION with which spawnAgent waited for the socket.
  t.regex(agent.output(), /stopped serving CNI: 4 commands served, 1 requests declined/);
  t.regex(agent.output(), /declined a CNI request, the shim runs the one-shot: CNI_NETNS \S+ is not visible in netplug-node/);
});

test.serial(
  'an IPAM plugin run from a CNI_PATH the agent cannot see: declined, counted by reason, and not ready once it repeats',
  async (t) => {
    const agent = await spawnAgent(t, agentEnv, { hide: [NETNS_DIR] });
    const readiness = async () => {
      const response = await fetch(`${agent.health}/readyz`, { signal: AbortSignal.timeout(30_000) });
      return `${response.status} ${await response.text()}`;
    };
    t.regex(await readiness(), /^200 /);
    // Served: netplug-ipam runs inside the agent, which needs no CNI_PATH for it.
    const netns = createNetns(t, 'path');
    const call = { containerId: containerId(), netns: netns.path, netconf: netconf(), path: '/nonexistent/cni/bin' };
    const env = (command: string) => ({ ...runtimeInput({ ...call, command }).env, NETPLUG_AGENT_SOCKET: agent.socket });
    for (const command of ['ADD', 'DEL']) {
      const served = invoke({ ...call, command, env: env(command) });
      t.is(served.status, 0, served.stdout);
      t.regex(served.stderr, /via="netplug-node"/, command);
    }
    const hostLocal = { ...netconf(), ipam: { type: 'host-local', subnet: '10.228.255.0/24' } };
    for (let i = 0; i < 2; i++) {
      const reply = await callAgent(agent.socket, {
        command: 'DEL',
        containerId: containerId(),
        path: '/nonexistent/cni/bin',
        netconf: hostLocal,
      });
      t.false(reply.accepted);
    }
    t.is(await agentMetric(agent, 'netplug_cni_requests_declined_total{reason="cni-path-not-visible"}'), 2);
    t.regex(
      await readiness(),
      /^503 \[-\]cni failed: CNI calls declined \(2 so far\), the shim runs the one-shot plugin for each: CNI_PATH directory \/nonexistent\/cni\/bin is not visible in netplug-node/,
    );
    t.is(await agent.stop(), 0);
  },
);

test.serial(
  'an unfinished ADD whose namespace the restarted agent cannot see is left to the runtime: no DEL, nothing released',
  async (t) => {
    const agent = await spawnAgent(t, agentEnv, { hide: [NETNS_DIR] });
    const netns = createNetns(t, 'crash');
    const call = { containerId: containerId(), netns: netns.path, netconf: netconf() };
    const env = (command: string) => ({ ...runtimeInput({ ...call, command }).env, NETPLUG_AGENT_SOCKET: agent.socket });
    const add = invoke({ ...call, command: 'ADD', env: env('ADD') });
    t.is(add.status, 0, add.stdout);
    // What a crash between the commit and the answer leaves: the ADD's journal entry.
    await agent.kill();
    const { env: addEnv, input } = runtimeInput({ ...call, command: 'ADD' });
    const inflight = join(dirname(agent.socket), 'inflight');
    const left = new InflightJournal(inflight);
    left.record({ env: addEnv, stdin: Buffer.from(input), program: 'netplug', pid: 1 });
    left.close();
    const restarted = await spawnAgent(t, agentEnv, { hide: [NETNS_DIR], dir: agent.dir });
    t.deepEqual(new InflightJournal(inflight).entries(), [], 'the entry is dropped');
    t.regex(restarted.output(), /an unfinished ADD is left to the runtime's DEL: its network namespace is not visible here/);
    t.true(addresses('eth0', netns).length > 0, 'the interface is left');
    t.not((await etcdKeys(t, etcd, `/netplug/ipam/v2/handle/netns.${call.containerId}`)).length, 0, 'its addresses are kept');
    // The runtime's DEL, through the shim, undoes it.
    const del = invoke({ ...call, command: 'DEL', env: { ...env('DEL'), NETPLUG_AGENT_SOCKET: restarted.socket } });
    t.is(del.status, 0, del.stdout);
    t.is(link('eth0', netns), undefined);
    t.deepEqual(await etcdKeys(t, etcd, `/netplug/ipam/v2/handle/netns.${call.containerId}`), []);
    t.is(await restarted.stop(), 0);
  },
);
