// netplug-node on the Kubernetes datastore, against a real kube-apiserver with netplug's CRDs
// installed and exactly the permissions the manifest's ClusterRole gives the agent:
// ClusterInformation as a custom resource (clusterType with kdd), the default pool (192.168.0.0/16
// without kubeadm's record) created once across restarts, and netplugctl version reading it.
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { NETPLUG_VERSION } from '../../ts/version.ts';
import { NETPLUGCTL } from '../helpers/ipam.ts';
import { installCrds, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import { NODE_AGENT_DATASTORE_RULES, NODE_AGENT_RULES, probe, readVarFile, ready, startAgent } from './agent.ts';

let kube: Kube;
let agentKubeconfig: string;
let custom: k8s.CustomObjectsApi;
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

  const info = (await custom.getClusterCustomObject({
    group: 'crd.projectnet.org',
    version: 'v1',
    plural: 'clusterinformations',
    name: 'default',
  })) as { spec: { kind: string; spec: Record<string, unknown> } };
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
  });

  const pools = () => JSON.parse(kctl('pool', 'list', '-o', 'json').stdout).pools as { name: string; cidr: string; natOutgoing: boolean }[];
  t.like(pools(), [{ name: 'default-ipv4-ippool', cidr: '192.168.0.0/16', natOutgoing: true }]);
  t.is(await agent.stop(), 0);

  // A restart (or a second node) finds everything in place: one pool, one ClusterInformation.
  const again = await startAgent(t, { ...env, NODENAME: 'node-k2', KUBECONFIG: agentKubeconfig });
  await ready(again);
  t.is(pools().length, 1);
  t.is(await again.stop(), 0);
});
