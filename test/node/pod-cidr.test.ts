// netplug-node with USE_POD_CIDR=true (host-local installs), against a real kube-apiserver with
// netplug's CRDs and exactly the rules the host-local manifest gives netplug-node: no default
// pool; not ready (on /readyz and in its log) until its Node has spec.podCIDRs; then
// <varDir>/pod-cidrs holds them, is written again when removed, and follows a new Node's CIDRs.
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { podCidrsOf, POD_CIDRS_FILE } from '../../ts/node/startup/follow-pod-cidrs.ts';
import { nodeSettings } from '../../ts/node/shared/settings.ts';
import { renderManifest } from '../../ts/render/manifests.ts';
import { installCrds, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import { probe, readVarFile, ready, startAgent } from './agent.ts';

test('USE_POD_CIDR: true or false in any letter case, unset is false; anything else is refused naming it', (t) => {
  const base = { NODENAME: 'n1' };
  t.false(nodeSettings(base).usePodCidr);
  t.true(nodeSettings({ ...base, USE_POD_CIDR: 'true' }).usePodCidr);
  t.true(nodeSettings({ ...base, USE_POD_CIDR: ' TRUE ' }).usePodCidr);
  t.false(nodeSettings({ ...base, USE_POD_CIDR: 'False' }).usePodCidr);
  t.false(nodeSettings({ ...base, USE_POD_CIDR: '' }).usePodCidr);
  t.throws(() => nodeSettings({ ...base, USE_POD_CIDR: 'yes' }), { message: 'USE_POD_CIDR "yes" must be true or false' });
});

test("a Node's pod CIDRs: spec.podCIDRs, else spec.podCIDR, canonical; none for a missing Node", (t) => {
  t.deepEqual(podCidrsOf(undefined), []);
  t.deepEqual(podCidrsOf({ spec: {} }), []);
  t.deepEqual(podCidrsOf({ spec: { podCIDR: '10.1.2.0/24' } }), ['10.1.2.0/24']);
  t.deepEqual(podCidrsOf({ spec: { podCIDR: '10.1.2.0/24', podCIDRs: ['10.1.2.0/24', 'FD00:0:0:2::/64'] } }), [
    '10.1.2.0/24',
    'fd00:0:0:2::/64',
  ]);
});

let kube: Kube;
let agentKubeconfig: string;
let custom: k8s.CustomObjectsApi;
const shared = sharedTeardowns(test);

/** The cluster-wide rules of netplug-node in deploy/manifests/netplug-host-local.yaml's source. */
function hostLocalNodeRules(): k8s.V1PolicyRule[] {
  const objects = renderManifest({ datastore: 'kubernetes', namespace: 'kube-system', image: 'x', ipam: 'host-local' });
  const bound = objects
    .filter((o) => o.kind === 'ClusterRoleBinding' && (o['subjects'] as { name: string }[]).some((s) => s.name === 'netplug-node'))
    .map((o) => (o['roleRef'] as { name: string }).name);
  return objects
    .filter((o) => o.kind === 'ClusterRole' && bound.includes(o.metadata.name))
    .flatMap((o) => o['rules'] as k8s.V1PolicyRule[]);
}

test.before(async () => {
  kube = await startKube(shared);
  await installCrds(kube);
  agentKubeconfig = (await kube.identityWith('netplug-node-host-local', hostLocalNodeRules())).kubeconfig;
  custom = kube.custom;
});

/** The agent's log lines (it writes to this process's stderr), from now until the test ends. */
function captureLog(t: { teardown(fn: () => void): void }): string[] {
  const lines: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    lines.push(...String(chunk).split('\n').filter(Boolean));
    return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stderr.write;
  t.teardown(() => {
    process.stderr.write = write;
  });
  return lines;
}

const createNode = (name: string, podCIDRs?: string[]) =>
  kube.core.createNode({ body: { metadata: { name }, spec: podCIDRs ? { podCIDR: podCIDRs[0], podCIDRs } : {} } });

test.serial('no default pool; not ready until the Node has pod CIDRs, then they are recorded and kept', async (t) => {
  const log = captureLog(t);
  await createNode('node-pc');
  t.teardown(() => kube.core.deleteNode({ name: 'node-pc' }).catch(() => {}));
  const agent = await startAgent(t, {
    NODENAME: 'node-pc',
    DATASTORE_TYPE: 'kubernetes',
    USE_POD_CIDR: 'true',
    KUBECONFIG: agentKubeconfig,
  });
  const waiting = await eventually('/readyz says why', async () =>
    /Node "node-pc" has no spec\.podCIDRs yet/.test((await probe(agent, '/readyz')).text),
  ).then(() => probe(agent, '/readyz'));
  t.is(waiting.status, 503);
  t.is(
    waiting.text,
    '[-]pod-cidrs failed: Node "node-pc" has no spec.podCIDRs yet (USE_POD_CIDR is true: they give the addresses)\nreadyz check failed\n',
  );
  t.true(log.some((line) => /WARNING.*not ready: Node "node-pc" has no spec\.podCIDRs yet/.test(line)));
  t.true(log.some((line) => /USE_POD_CIDR is true: no default pool/.test(line)));
  t.false(existsSync(join(agent.varDir, POD_CIDRS_FILE)));

  // What the node IPAM controller does once it has a CIDR for the node.
  await kube.core.patchNode(
    { name: 'node-pc', body: { spec: { podCIDR: '10.244.7.0/24', podCIDRs: ['10.244.7.0/24'] } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
  await ready(agent);
  t.is(readVarFile(agent, POD_CIDRS_FILE), '10.244.7.0/24\n');
  t.true(log.some((line) => line.includes(`recorded pod CIDRs 10.244.7.0/24 in ${join(agent.varDir, POD_CIDRS_FILE)}`)));
  const pools = (await custom.listClusterCustomObject({ group: 'crd.projectnet.org', version: 'v1', plural: 'ippools' })) as {
    items: unknown[];
  };
  t.is(pools.items.length, 0, 'no IP pool was created');

  // A host clean-up removed the file: written again.
  rmSync(join(agent.varDir, POD_CIDRS_FILE));
  await eventually('pod-cidrs written again', () => existsSync(join(agent.varDir, POD_CIDRS_FILE)));
  t.is(readVarFile(agent, POD_CIDRS_FILE), '10.244.7.0/24\n');
  t.is(await agent.stop(), 0);
});

test.serial('a Node recreated with other (dual-stack) pod CIDRs is recorded again', async (t) => {
  const log = captureLog(t);
  await createNode('node-pc2', ['10.244.9.0/24']);
  t.teardown(() => kube.core.deleteNode({ name: 'node-pc2' }).catch(() => {}));
  const agent = await startAgent(t, {
    NODENAME: 'node-pc2',
    DATASTORE_TYPE: 'kubernetes',
    USE_POD_CIDR: 'true',
    KUBECONFIG: agentKubeconfig,
  });
  await ready(agent);
  t.is(readVarFile(agent, POD_CIDRS_FILE), '10.244.9.0/24\n');

  // spec.podCIDRs cannot change in place; a Node deleted and registered again can get new ones.
  await kube.core.deleteNode({ name: 'node-pc2' });
  await createNode('node-pc2', ['10.244.10.0/24', 'fd00:10:244:a::/64']);
  await eventually('the new CIDRs recorded', () => readVarFile(agent, POD_CIDRS_FILE) === '10.244.10.0/24\nfd00:10:244:a::/64\n');
  t.true(log.some((line) => /pod CIDRs changed from 10\.244\.9\.0\/24 to 10\.244\.10\.0\/24, fd00:10:244:a::\/64/.test(line)));
  t.is((await probe(agent, '/readyz')).status, 200);
  t.is(await agent.stop(), 0);
});

test.serial("without the right to read its Node (the host-local manifest's role missing), /readyz says so", async (t) => {
  const rules = hostLocalNodeRules().filter((rule) => !rule.resources?.includes('nodes'));
  const { kubeconfig } = await kube.identityWith('netplug-node-no-nodes', rules);
  const agent = await startAgent(t, { NODENAME: 'node-pc3', DATASTORE_TYPE: 'kubernetes', USE_POD_CIDR: 'true', KUBECONFIG: kubeconfig });
  await eventually('/readyz names the refusal', async () => /cannot read Node "node-pc3"/.test((await probe(agent, '/readyz')).text));
  const { status, text } = await probe(agent, '/readyz');
  t.is(status, 503);
  t.regex(
    text,
    /^\[-\]pod-cidrs failed: cannot read Node "node-pc3" for its spec\.podCIDRs \(USE_POD_CIDR is true\): HTTP 403: nodes "node-pc3" is forbidden: User "netplug-node-no-nodes" cannot list resource "nodes"/,
  );
  t.is(await agent.stop(), 0);
});
