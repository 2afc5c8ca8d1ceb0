// Network policy under the real kubelet, as deploy/manifests/netplug.yaml installs it (enforcement
// on by default): busybox servers in namespace x and a client, Kubernetes NetworkPolicies created
// and deleted, connections probed from the client with wget. The conflist waits up to 10 s for a
// pod's status file (policy_setup_timeout_seconds): pods start once their policy is in, not after
// the wait. The kubelet's readiness probes reach the servers whatever the policy.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import test from 'ava';

import { statusFileName } from '../../ts/plugin/policy-wait.ts';
import { apply, clusterPerFile, getJson } from '../helpers/cluster.ts';
import { nftBinary } from '../helpers/kernel.ts';
import { eventually, imageArchive, manifestFor, nodePaths, type NodePaths, writeKubeadmConfig } from './install.ts';
import { clientPod, networkPolicy, policyProbes, serverPod } from './policy-probes.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const NS = 'x';
const cluster = clusterPerFile(test, { systemPlugins: false });
let paths: NodePaths;
/** The node's endpoint-status directory, where the plugin looks (the agent's socket directory on the host). */
let statusDir = '';

const server = (name: string, role: string) => serverPod(NS, name, role);
const client = clientPod(NS);
const probes = policyProbes(cluster, NS);
const { settles } = probes;

/** `nft list table inet netplug` in the node (the system's nft: node_modules/.bin has another). */
const nftTable = () => cluster().inNode(nftBinary(), ['list', 'table', 'inet', 'netplug']);

test.afterEach.always(async (t) => {
  if (t.passed) return;
  const c = cluster();
  t.log(probes.lastFailure);
  t.log(await nftTable().catch((err: Error) => err.message));
  const [agent] = (await getJson(c, 'pods', '-n', 'kube-system', '-l', 'k8s-app=netplug-node')).items;
  if (agent)
    t.log(
      await c.kubectl('logs', '-n', 'kube-system', agent.metadata.name, '-c', 'netplug-node', '--tail=200').catch((e: Error) => e.message),
    );
});

test.serial('install the manifest as shipped (enforcement on) with a 10 s policy setup wait in the conflist', async (t) => {
  const c = cluster();
  await c.importImage(imageArchive());
  await writeKubeadmConfig(c);
  paths = nodePaths(c);
  // The test node's status directory is under its own socket directory, as /var/run/netplug is on a node (manifestFor).
  statusDir = join(dirname(paths.agentSocket), 'endpoint-status');
  const shipped = readFileSync(join(ROOT, 'deploy/manifests/netplug.yaml'), 'utf8');
  t.regex(shipped, /^ {2}policy_enforcement: 'true'$/m, 'the manifest ships with enforcement on');
  const manifest = manifestFor(c, 'netplug.yaml', paths);
  const text = readFileSync(manifest, 'utf8');
  const edited = text.replace(/"endpoint_status_dir": "[^"]*",/, (field) => `${field}\n          "policy_setup_timeout_seconds": 10,`);
  t.not(edited, text, 'the conflist template names endpoint_status_dir');
  writeFileSync(manifest, edited);
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
  await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
  await c.kubectl('rollout', 'status', '-n', 'kube-system', 'daemonset/netplug-node', '--timeout=300s');
  const conflist = JSON.parse(readFileSync(join(c.cniConfDir, '10-netplug.conflist'), 'utf8'));
  t.is(conflist.plugins[0].policy_setup_timeout_seconds, 10);
  t.is(conflist.plugins[0].endpoint_status_dir, statusDir);
});

test.serial('pods start without waiting out the policy setup timeout: each has its status file, the plugin logged no wait', async (t) => {
  const c = cluster();
  await c.kubectl('create', 'namespace', NS);
  const started = Date.now();
  await apply(c, server('server-a', 'protected'), server('server-b', 'open'), client);
  await c.kubectl('wait', '-n', NS, '--for=condition=Ready', 'pod', '--all', '--timeout=120s');
  t.log(`create → 3 pods Ready: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  for (const name of ['server-a', 'server-b', 'client']) {
    const pod = await getJson(c, 'pod', '-n', NS, name);
    const running = pod.status.containerStatuses[0].state.running.startedAt;
    t.log(`${name}: created → Running ${((Date.parse(running) - Date.parse(pod.metadata.creationTimestamp)) / 1000).toFixed(0)} s`);
    t.true(existsSync(join(statusDir, statusFileName('k8s', NS, name, 'eth0'))), `${name}'s status file`);
  }
  t.log(`status files: ${readdirSync(statusDir).join(', ')}`);
  t.true(await settles('server-a', true));
  t.true(await settles('server-b', true));
  const cniLog = existsSync(paths.logFile) ? readFileSync(paths.logFile, 'utf8') : '';
  t.notRegex(cniLog, /did not report the pod's policy programmed/);
});

test.serial('a default-deny ingress policy on server-a blocks the client; the kubelet still probes it; nft lists the policy', async (t) => {
  const c = cluster();
  const before = await nftTable();
  t.notRegex(before, /chain pi-/, 'no policy chain before a policy');
  await apply(c, networkPolicy(NS, 'deny-protected', { podSelector: { matchLabels: { role: 'protected' } }, policyTypes: ['Ingress'] }));
  t.true(await settles('server-a', false));
  t.true(await settles('server-b', true), 'a pod the policy does not select stays open');
  const listing = await nftTable();
  t.regex(listing, /chain pi-[0-9a-f]{16} \{/);
  t.log(
    listing
      .split('\n')
      .filter((line) => /^\s*chain /.test(line))
      .map((line) => line.trim())
      .join(' '),
  );
  // Readiness probes every second, failing at the first miss: still Ready after a few.
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const ready = (await getJson(c, 'pod', '-n', NS, 'server-a')).status.conditions.find((cond: any) => cond.type === 'Ready');
  t.is(ready.status, 'True', 'the kubelet reaches a pod under default-deny');
});

test.serial('allowing ingress from the client labels lets it through; deleting the allow blocks it again', async (t) => {
  const c = cluster();
  await apply(
    c,
    networkPolicy(NS, 'allow-client', {
      podSelector: { matchLabels: { role: 'protected' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ protocol: 'TCP', port: 80 }] }],
    }),
  );
  t.true(await settles('server-a', true));
  t.regex(await nftTable(), /allow-client ingress rule 0/);
  await c.kubectl('delete', 'networkpolicy', '-n', NS, 'allow-client', '--wait=true');
  t.true(await settles('server-a', false));
  t.notRegex(await nftTable(), /allow-client/);
});

test.serial('deleting the namespace removes its pods, their status files and the policy chains', async (t) => {
  const c = cluster();
  await c.kubectl('delete', 'namespace', NS, '--wait=true', '--timeout=120s');
  await eventually(
    'no status file of namespace x left',
    async () => !readdirSync(statusDir).some((name) => name.startsWith(`k8s ${NS}%2F`)),
    60,
  );
  await eventually('no policy chain left', async () => !/chain pi-/.test(await nftTable()), 60);
  t.false(
    readdirSync(statusDir).some((name) => name.startsWith(`k8s ${NS}%2F`)),
    'no status file of the namespace',
  );
  t.notRegex(await nftTable(), /chain pi-/, 'no policy chain');
});
