// The policy-only install (deploy/manifests/netplug-policy-only.yaml) under the real kubelet:
// netplug enforces network policy, pods take their addresses from host-local (the node's pod CIDR)
// and routing between nodes is the cluster's (its route controller, or its network): netplug-node
// runs with NETPLUG_NETWORKING_BACKEND=none and programs no routes, tunnels or natOutgoing.
// Then, on the same cluster (one cluster start less for CI), the flannel variant
// (deploy/manifests/netplug-flannel.yaml) replaces it: the same policy, flanneld carrying pods
// between nodes. One node only: that flanneld takes the node's subnet and makes its VXLAN device is
// tested here; routing between nodes is flannel's own.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { contains, parseIp, parsePrefix } from '../../ts/net/cidr.ts';
import { apply, type Cluster, clusterPerFile, getJson } from '../helpers/cluster.ts';
import { nftBinary } from '../helpers/kernel.ts';
import { eventually, flannelImageArchive, imageArchive, manifestFor, nodePaths, writeKubeadmConfig } from './install.ts';
import { clientPod, networkPolicy, policyProbes, serverPod } from './policy-probes.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const NS = 'policy-only';
const cluster = clusterPerFile(test, { systemPlugins: false });
const probes = policyProbes(cluster, NS);
let policyOnlyManifest = '';

const containerLog = async (container: string) => {
  const [agent] = (await getJson(cluster(), 'pods', '-n', 'kube-system', '-l', 'k8s-app=netplug-node')).items;
  return agent ? cluster().kubectl('logs', '-n', 'kube-system', agent.metadata.name, '-c', container, '--tail=300') : '';
};
const agentLog = () => containerLog('netplug-node');
let flannelInstalled = false;

test.afterEach.always(async (t) => {
  if (t.passed) return;
  t.log(probes.lastFailure);
  t.log(await agentLog().catch((err: Error) => err.message));
  if (flannelInstalled) t.log(await containerLog('flannel').catch((err: Error) => err.message));
});

/**
 * The namespace's two servers and client, Ready, each with an address in the node's pod CIDR. Both
 * variants make them under the same names, so the kubelet's garbage collection of the first
 * variant's sandboxes (DELs without a namespace) comes while the second's pods, whose host veths
 * have the same names, are probed: those DELs must leave them their host routes.
 */
async function podsInPodCidr(t: ExecutionContext, c: Cluster): Promise<void> {
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
}

/**
 * Policy at work, from an open server-a: a default-deny ingress policy on it blocks the client
 * while server-b, which no policy selects, stays open; an allow from the client then lets it
 * through. The namespace goes at the end.
 */
async function denyThenAllow(t: ExecutionContext, c: Cluster): Promise<void> {
  await apply(c, networkPolicy(NS, 'deny-protected', { podSelector: { matchLabels: { role: 'protected' } }, policyTypes: ['Ingress'] }));
  t.true(await probes.settles('server-a', false), 'the default-deny blocks the client');
  t.true(await probes.settles('server-b', true), 'a pod the policy does not select stays open');
  await apply(
    c,
    networkPolicy(NS, 'allow-client', {
      podSelector: { matchLabels: { role: 'protected' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ protocol: 'TCP', port: 80 }] }],
    }),
  );
  t.true(await probes.settles('server-a', true), 'the allow from the client lets it through');
  await c.kubectl('delete', 'namespace', NS, '--wait=true', '--timeout=120s');
}

test.serial('the policy-only manifest installs: host-local with the pod CIDR, NETPLUG_NETWORKING_BACKEND=none', async (t) => {
  const c = cluster();
  await c.importImage(imageArchive());
  await writeKubeadmConfig(c);
  policyOnlyManifest = manifestFor(c, 'netplug-policy-only.yaml', nodePaths(c));
  const manifest = policyOnlyManifest;
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
  await podsInPodCidr(t, c);
  t.true(await probes.settles('server-a', true));
  t.regex(await agentLog(), /NETPLUG_NETWORKING_BACKEND=none: routing between nodes is left to the cluster/);
  const links = await c.inNode('ip', ['-o', 'link', 'show']);
  t.notRegex(links, /vxlan\.netplug/, 'no VXLAN device');
  const table = await c.inNode(nftBinary(), ['list', 'table', 'inet', 'netplug']);
  t.notRegex(table, /chain nat-outgoing/, 'no natOutgoing');
  t.regex(table, /chain /, "the table holds policy's part");
});

test.serial('a default-deny ingress policy blocks the client; an allow from the client lets it through, on that pod alone', async (t) => {
  await denyThenAllow(t, cluster());
});

/** The variant's copy for the test node: flanneld's subnet file in the cluster's directory, not this machine's /run/flannel. */
function flannelManifest(c: Cluster): { manifest: string; runFlannel: string } {
  const runFlannel = join(c.dir, 'run-flannel');
  mkdirSync(runFlannel, { recursive: true });
  const manifest = manifestFor(c, 'netplug-flannel.yaml', nodePaths(c));
  const text = readFileSync(manifest, 'utf8');
  // The volume's hostPath only: the container's mountPath stays /run/flannel, where flanneld writes.
  const moved = text.replace(/^(\s+)path: \/run\/flannel$/m, `$1path: ${runFlannel}`);
  if (moved === text) throw new Error('netplug-flannel.yaml has no hostPath /run/flannel');
  writeFileSync(manifest, moved);
  return { manifest, runFlannel };
}

test.serial("the flannel variant replaces it: flanneld takes the node's pod CIDR, writes its subnet file, makes flannel.1", async (t) => {
  const c = cluster();
  // The removal docs/install.md gives; netplug-node deletes its table as it goes.
  await c.kubectl('delete', '-f', policyOnlyManifest, '--wait=true', '--timeout=120s');
  await eventually(
    'netplug-node gone',
    async () => (await getJson(c, 'pods', '-n', 'kube-system', '-l', 'k8s-app=netplug-node')).items.length === 0,
  );
  await c.importImage(flannelImageArchive());
  const { manifest, runFlannel } = flannelManifest(c);
  flannelInstalled = true;
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
  await c.kubectl('rollout', 'status', '-n', 'kube-system', 'daemonset/netplug-node', '--timeout=300s');
  const ds = await getJson(c, 'daemonset', '-n', 'kube-system', 'netplug-node');
  const containers = ds.spec.template.spec.containers;
  t.deepEqual(
    containers.map((container: { name: string }) => container.name),
    ['netplug-node', 'install-cni', 'flannel'],
  );
  const env = containers[0].env;
  t.is(env.find((e: { name: string }) => e.name === 'NETPLUG_NETWORKING_BACKEND')?.value, 'none');
  const node = (await getJson(c, 'nodes')).items[0];
  const podCidr = node.spec.podCIDR as string;
  // flanneld's lease is the node's pod CIDR: the subnet file names it (its first address) and the VXLAN MTU.
  const subnetEnv = readFileSync(join(runFlannel, 'subnet.env'), 'utf8');
  t.regex(subnetEnv, /^FLANNEL_NETWORK=10\.244\.0\.0\/16$/m);
  t.regex(subnetEnv, new RegExp(`^FLANNEL_SUBNET=${podCidr.replace(/\.0\/(\d+)$/, '.1/$1').replaceAll('.', '\\.')}$`, 'm'));
  t.regex(subnetEnv, /^FLANNEL_IPMASQ=true$/m);
  t.is(node.metadata.annotations['flannel.alpha.coreos.com/backend-type'], 'vxlan');
  const link = await c.inNode('ip', ['-d', 'link', 'show', 'flannel.1']);
  t.regex(link, /vxlan id 1 /);
  // Pods' MTU leaves room for VXLAN's 50 bytes.
  const conflist = JSON.parse(readFileSync(join(c.cniConfDir, '10-netplug.conflist'), 'utf8'));
  t.is(conflist.plugins[0].mtu, 1450);
  t.deepEqual(conflist.plugins[0].ipam, { type: 'host-local', subnet: 'usePodCidr' });
});

test.serial(
  "with flannel, pods in the node's pod CIDR at MTU 1450; default-deny blocks, an allow admits, an unselected pod stays open",
  async (t) => {
    const c = cluster();
    await podsInPodCidr(t, c);
    t.is((await c.kubectl('exec', '-n', NS, 'client', '--', 'cat', '/sys/class/net/eth0/mtu')).trim(), '1450');
    t.true(await probes.settles('server-a', true));
    await denyThenAllow(t, c);
  },
);
