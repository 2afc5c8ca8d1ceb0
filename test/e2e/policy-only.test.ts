// The policy-only install (deploy/manifests/netplug-policy-only.yaml) under the real kubelet:
// netplug enforces network policy, pods take their addresses from host-local (the node's pod CIDR)
// and routing between nodes is the cluster's (its route controller, or its network): netplug-node
// runs with NETPLUG_NETWORKING_BACKEND=none and programs no routes, tunnels or natOutgoing.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { contains, parseIp, parsePrefix } from '../../ts/net/cidr.ts';
import { apply, clusterPerFile, getJson } from '../helpers/cluster.ts';
import { nftBinary } from '../helpers/kernel.ts';
import { imageArchive, manifestFor, nodePaths, writeKubeadmConfig } from './install.ts';
import { clientPod, networkPolicy, policyProbes, serverPod } from './policy-probes.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const NS = 'policy-only';
const cluster = clusterPerFile(test, { systemPlugins: false });
const probes = policyProbes(cluster, NS);

const agentLog = async () => {
  const [agent] = (await getJson(cluster(), 'pods', '-n', 'kube-system', '-l', 'k8s-app=netplug-node')).items;
  return agent ? cluster().kubectl('logs', '-n', 'kube-system', agent.metadata.name, '-c', 'netplug-node', '--tail=300') : '';
};

test.afterEach.always(async (t) => {
  if (t.passed) return;
  t.log(probes.lastFailure);
  t.log(await agentLog().catch((err: Error) => err.message));
});

test.serial('the policy-only manifest installs: host-local with the pod CIDR, NETPLUG_NETWORKING_BACKEND=none', async (t) => {
  const c = cluster();
  await c.importImage(imageArchive());
  await writeKubeadmConfig(c);
  const manifest = manifestFor(c, 'netplug-policy-only.yaml', nodePaths(c));
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
  await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
  await c.kubectl('rollout', 'status', '-n', 'kube-system', 'daemonset/netplug-node', '--timeout=300s');
  const ds = await getJson(c, 'daemonset', '-n', 'kube-system', 'netplug-node');
  const env = ds.spec.template.spec.containers.find((container: { name: string }) => container.name === 'netplug-node').env;
  const value = (name: string) => env.find((e: { name: string }) => e.name === name)?.value;
  t.is(value('NETPLUG_NETWORKING_BACKEND'), 'none');
  t.is(value('USE_POD_CIDR'), 'true');
  const conflist = JSON.parse(readFileSync(join(c.cniConfDir, '10-netplug.conflist'), 'utf8'));
  t.deepEqual(conflist.plugins[0].ipam, { type: 'host-local', subnet: 'usePodCidr' });
  t.is(conflist.plugins[0].policy.type, 'k8s');
});

test.serial("pods take addresses in the node's pod CIDR; netplug-node programs no routes, tunnels or natOutgoing", async (t) => {
  const c = cluster();
  await c.kubectl('create', 'namespace', NS);
  await apply(c, serverPod(NS, 'server-a', 'protected'), serverPod(NS, 'server-b', 'open'), clientPod(NS));
  await c.kubectl('wait', '-n', NS, '--for=condition=Ready', 'pod', '--all', '--timeout=120s');
  const node = (await getJson(c, 'nodes')).items[0];
  const podCidr = parsePrefix(node.spec.podCIDR);
  if (!podCidr) throw new Error(`the node has no pod CIDR: ${JSON.stringify(node.spec)}`);
  for (const name of ['server-a', 'server-b', 'client']) {
    const ip = parseIp(await probes.podIp(name));
    t.true(ip !== undefined && contains(podCidr, ip.family, ip.value), `${name} is in ${node.spec.podCIDR}`);
  }
  t.true(await probes.settles('server-a', true));
  t.regex(await agentLog(), /NETPLUG_NETWORKING_BACKEND=none: routing between nodes is left to the cluster/);
  const links = await c.inNode('ip', ['-o', 'link', 'show']);
  t.notRegex(links, /vxlan\.netplug/, 'no VXLAN device');
  const table = await c.inNode(nftBinary(), ['list', 'table', 'inet', 'netplug']);
  t.notRegex(table, /chain nat-outgoing/, 'no natOutgoing');
  t.regex(table, /chain /, "the table holds policy's part");
});

test.serial('a default-deny ingress policy blocks the client; an allow from the client lets it through, on that pod alone', async (t) => {
  const c = cluster();
  await apply(c, networkPolicy(NS, 'deny-protected', { podSelector: { matchLabels: { role: 'protected' } }, policyTypes: ['Ingress'] }));
  t.true(await probes.settles('server-a', false));
  t.true(await probes.settles('server-b', true), 'a pod the policy does not select stays open');
  await apply(
    c,
    networkPolicy(NS, 'allow-client', {
      podSelector: { matchLabels: { role: 'protected' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ protocol: 'TCP', port: 80 }] }],
    }),
  );
  t.true(await probes.settles('server-a', true));
  await c.kubectl('delete', 'namespace', NS, '--wait=true', '--timeout=120s');
});
