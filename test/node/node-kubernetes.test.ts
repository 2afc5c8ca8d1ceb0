// netplug-node on the Kubernetes datastore, against a real kube-apiserver with netplug's CRDs
// installed and exactly the permissions the manifest's ClusterRole gives the agent:
// ClusterInformation as a custom resource (clusterType with kdd), the default pool (192.168.0.0/16
// without kubeadm's record) created once across restarts, netplugctl version reading it, and the
// release each agent records on its Node, the lowest of which is the cluster's version.
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';
import { PatchStrategy, setHeaderOptions, type CustomObjectsApi } from '@kubernetes/client-node';

import { NETPLUG_VERSION } from '../../ts/version.ts';
import { NETPLUGCTL } from '../helpers/ipam.ts';
import { installCrds, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import { NODE_AGENT_DATASTORE_RULES, NODE_AGENT_RULES, probe, readVarFile, ready, startAgent } from './agent.ts';

let kube: Kube;
let agentKubeconfig: string;
let custom: CustomObjectsApi;
const shared = sharedTeardowns(test);

test.before(async () => {
  kube = await startKube(shared);
  await installCrds(kube);
  agentKubeconfig = (await kube.identityWith('netplug-node-kdd', [...NODE_AGENT_RULES, ...NODE_AGENT_DATASTORE_RULES])).kubeconfig;
  custom = kube.custom;
});

function kctl(...args: string[]) {
  return spawnSync(NETPLUGCTL, ['--kubeconfig', kube.server.admin.kubeconfig, ...args], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin' },
    timeout: 60_000,
  });
}

const env = { NODENAME: 'node-k1', DATASTORE_TYPE: 'kubernetes', CLUSTER_TYPE: 'k8s' };
const CLUSTER_INFO = { group: 'crd.projectnet.org', version: 'v1', plural: 'clusterinformations', name: 'default' };

test('ClusterInformation and the default pool as custom resources; netplugctl version reads them', async (t) => {
  const before = kctl('version');
  t.is(before.status, 1);
  t.is(before.stdout, `Client Version:    ${NETPLUG_VERSION}\n`);
  t.regex(
    before.stderr,
    /^netplugctl: the cluster's version is unknown: .* has no ClusterInformation "default" .*netplug-node has not started/,
  );

  const agent = await startAgent(t, { ...env, KUBECONFIG: agentKubeconfig });
  await ready(agent);
  t.is(readVarFile(agent, 'nodename'), 'node-k1');
  // Kept: a file removed (a host clean-up, a reinstall) is written again.
  const mtu = readVarFile(agent, 'mtu');
  rmSync(join(agent.varDir, 'mtu'));
  await eventually('the mtu file is written again', () => existsSync(join(agent.varDir, 'mtu')));
  t.is(readVarFile(agent, 'mtu'), mtu);
  t.is((await probe(agent, '/livez')).status, 200);

  const info = (await custom.getClusterCustomObject(CLUSTER_INFO)) as { spec: { kind: string; spec: Record<string, unknown> } };
  t.is(info.spec.kind, 'ClusterInformation');
  t.like(info.spec.spec, { clusterType: 'k8s,kdd', netplugVersion: NETPLUG_VERSION, datastoreReady: true, variant: 'netplug' });
  t.regex(String(info.spec.spec['clusterGUID']), /^[0-9a-f]{32}$/);

  const version = kctl('version');
  t.is(version.stderr, '');
  t.is(version.stdout, `Client Version:    ${NETPLUG_VERSION}\nCluster Version:   ${NETPLUG_VERSION}\nCluster Type:      k8s,kdd\n`);
  t.deepEqual(JSON.parse(kctl('version', '-o', 'json').stdout), {
    clientVersion: NETPLUG_VERSION,
    clusterVersion: NETPLUG_VERSION,
    clusterType: 'k8s,kdd',
    nodes: [],
  });

  const pools = () => JSON.parse(kctl('pool', 'list', '-o', 'json').stdout).pools as { name: string; cidr: string; natOutgoing: boolean }[];
  t.like(pools(), [{ name: 'default-ipv4-ippool', cidr: '192.168.0.0/16', natOutgoing: true }]);
  t.is(await agent.stop(), 0);

  // A restart (or a second node) finds everything in place: one pool, one ClusterInformation.
  const again = await startAgent(t, { ...env, NODENAME: 'node-k2', KUBECONFIG: agentKubeconfig });
  await ready(again);
  t.is(pools().length, 1);
  t.is(await again.stop(), 0);

  // A rolling upgrade half done: node-k3's agent is from before nodes recorded their release and
  // wrote its own (v3.30.2) as it last started. node-k1's agent records this release on its Node,
  // and the cluster stays at the lowest release a node runs.
  for (const name of ['node-k1', 'node-k3']) {
    await kube.core.createNode({ body: { metadata: { name } } });
    t.teardown(() => kube.core.deleteNode({ name }));
  }
  await custom.patchClusterCustomObject(
    { ...CLUSTER_INFO, body: { spec: { spec: { netplugVersion: 'v3.30.2' } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  const upgraded = await startAgent(t, { ...env, KUBECONFIG: agentKubeconfig });
  await ready(upgraded);
  const annotations = (await kube.core.readNode({ name: 'node-k1' })).metadata?.annotations ?? {};
  t.is(annotations['projectnet.org/netplug-version'], NETPLUG_VERSION);
  t.is(
    kctl('version').stdout,
    `Client Version:    ${NETPLUG_VERSION}\nCluster Version:   v3.30.2\nCluster Type:      k8s,kdd\n\n` +
      `NODE     VERSION\nnode-k1  ${NETPLUG_VERSION}\nnode-k3  (none recorded)\n`,
  );
  t.is(await upgraded.stop(), 0);
  // node-k3 upgraded too: every node records this release, and so the cluster says it.
  const last = await startAgent(t, { ...env, NODENAME: 'node-k3', KUBECONFIG: agentKubeconfig });
  await ready(last);
  t.deepEqual(JSON.parse(kctl('version', '-o', 'json').stdout), {
    clientVersion: NETPLUG_VERSION,
    clusterVersion: NETPLUG_VERSION,
    clusterType: 'k8s,kdd',
    nodes: [
      { name: 'node-k1', version: NETPLUG_VERSION },
      { name: 'node-k3', version: NETPLUG_VERSION },
    ],
  });
  t.is(await last.stop(), 0);
});
