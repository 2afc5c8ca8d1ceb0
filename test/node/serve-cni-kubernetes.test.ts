// netplug-node serving CNI on the Kubernetes datastore (a real kube-apiserver with netplug's CRDs):
// ADD, CHECK and DEL through the agent on real network namespaces, with the agent's identity
// holding the datastore rights; and DEL without datastore credentials on the host: with the
// netconf's kubeconfig gone, the one-shot's DEL fails naming it, the agent's releases the address
// with its own identity.
import { copyFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { openStore } from '../../ts/store/open.ts';
import { callAgent } from '../helpers/agent-client.ts';
import { ONE_SHOT, spawnAgent } from '../helpers/agent-server.ts';
import { invoke, tempDir } from '../helpers/cni.ts';
import { addressesOf } from '../helpers/ipam.ts';
import { addresses, containerId, createNetns, link } from '../helpers/kernel.ts';
import { DATASTORE_RULES, installCrds, PLUGIN_RULES, removeIpamLockFileAfter, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { NODE_AGENT_DATASTORE_RULES, NODE_AGENT_RULES } from './agent.ts';

const POOL = '10.222.0.0/16';
const NODE = 'node-serve-kdd';

let kube: Kube;
let pluginKubeconfig: string;
let agentEnv: Record<string, string>;
const shared = sharedTeardowns(test);

test.before(async () => {
  removeIpamLockFileAfter(shared);
  kube = await startKube(shared);
  await installCrds(kube);
  pluginKubeconfig = (await kube.identityWith('netplug-cni-serve-kdd', [...PLUGIN_RULES, ...DATASTORE_RULES])).kubeconfig;
  await kube.core.createNode({ body: { metadata: { name: NODE } } });
  // The agent serves the plugin's datastore work with its own identity: its rights and the plugin's.
  const agentRules = [...NODE_AGENT_RULES, ...NODE_AGENT_DATASTORE_RULES, ...PLUGIN_RULES, ...DATASTORE_RULES];
  agentEnv = {
    NODENAME: NODE,
    DATASTORE_TYPE: 'kubernetes',
    KUBECONFIG: (await kube.identityWith('netplug-node-serve-kdd', agentRules)).kubeconfig,
    NETPLUG_IPV4POOL_CIDR: POOL,
    NETPLUG_NETWORKING_BACKEND: 'none',
  };
});

/** The netconf install-cni writes, with its own copy of the plugin's kubeconfig (a test may remove it). */
function netconf(t: Parameters<typeof tempDir>[0]) {
  const kubeconfig = join(tempDir(t, 'kubeconfig'), 'netplug-kubeconfig');
  copyFileSync(pluginKubeconfig, kubeconfig);
  return {
    kubeconfig,
    netconf: {
      cniVersion: '1.1.0',
      name: 'serve-kdd',
      type: 'netplug',
      nodename: NODE,
      datastore_type: 'kubernetes',
      kubernetes: { kubeconfig },
      ipam: { type: 'netplug-ipam' },
    },
  };
}

/** The handles the datastore holds, seen with the administrator's credentials. */
async function handles(t: Parameters<typeof tempDir>[0]): Promise<string[]> {
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.server.admin.kubeconfig } });
  t.teardown(() => store.close());
  return store.listKeys('/netplug/ipam/v2/handle/serve-kdd.');
}

test.serial('ADD, CHECK and DEL through the agent on the Kubernetes datastore', async (t) => {
  const agent = await spawnAgent(t, agentEnv);
  const netns = createNetns(t, 'kdd');
  const call = { containerId: containerId(), netns: netns.path, netconf: netconf(t).netconf };
  const add = await callAgent(agent.socket, { ...call, command: 'ADD' });
  t.is(add.exitCode, 0, add.stdout);
  const [address] = addressesOf(add.json);
  t.true(address?.startsWith('10.222.'), address);
  t.true(addresses('eth0', netns).includes(`${address}/32`));
  t.regex(add.stderr ?? '', /via="netplug-node"/);
  t.deepEqual(await handles(t), [`/netplug/ipam/v2/handle/serve-kdd.${call.containerId}`]);
  const check = await callAgent(agent.socket, { ...call, command: 'CHECK', netconf: { ...call.netconf, prevResult: add.json } });
  t.is(check.exitCode, 0, check.stdout);
  const del = await callAgent(agent.socket, { ...call, command: 'DEL' });
  t.is(del.exitCode, 0, del.stdout);
  t.is(link('eth0', netns), undefined);
  t.deepEqual(await handles(t), []);
});

test.serial('DEL needs no datastore credentials on the host when the agent serves it', async (t) => {
  const agent = await spawnAgent(t, agentEnv);
  const netns = createNetns(t, 'nocreds');
  const { kubeconfig, netconf: conf } = netconf(t);
  const call = { containerId: containerId(), netns: netns.path, netconf: conf };
  const add = await callAgent(agent.socket, { ...call, command: 'ADD' });
  t.is(add.exitCode, 0, add.stdout);
  rmSync(kubeconfig);

  // The one-shot has nothing to reach the datastore with: a clear error naming the file.
  const oneShot = invoke({ ...call, command: 'DEL', executable: ONE_SHOT });
  t.is(oneShot.status, 1);
  t.regex(oneShot.json?.msg ?? '', new RegExp(kubeconfig.replaceAll('.', '\\.')));
  t.log(`the one-shot's DEL: ${oneShot.json?.msg}`);
  t.deepEqual(await handles(t), [`/netplug/ipam/v2/handle/serve-kdd.${call.containerId}`], 'the address is still held');

  const del = await callAgent(agent.socket, { ...call, command: 'DEL' });
  t.true(del.accepted);
  t.is(del.exitCode, 0, del.stdout);
  t.deepEqual(await handles(t), [], 'released with the agent’s own identity');
  t.is(link('eth0', netns), undefined);
});
