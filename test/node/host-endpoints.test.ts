// Host endpoints enforced by netplug-node on the Kubernetes datastore, proved with real packets:
// a node (policy-node.ts) whose eth0 faces a router outside the cluster, with a pod on it. The
// router connects to the node's own listeners and, through the node, to the pod; the node connects
// out to the router's. HostEndpoint and GlobalNetworkPolicy objects in the API change what passes:
// a host endpoint alone closes the node but for the failsafe ports, normal policies open it,
// applyOnForward policies reach forwarded traffic, preDNAT policies drop before DNAT, doNotTrack
// policies let traffic through untracked, the built-in allow-all profile opens everything again,
// and netplugctl's migration to automatic host endpoints (with netplug-kube-controllers running)
// breaks no connection while traffic flows.
import { spawn } from 'node:child_process';

import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import { CONTROLLER_DATASTORE_RULES, CONTROLLER_RULES, controllersIdentity, startControllers } from '../controllers/fixtures.ts';
import { eventually } from '../helpers/eventually.ts';
import { NETPLUGCTL } from '../helpers/ipam.ts';
import type { Kube } from '../helpers/kube.ts';
import type { Netns, TestNode } from '../helpers/nodes.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { connectsTo, createRunningPod, ECHO_PORT, echoListener, plugNetns, sh, startPolicyNode, type PolicyNode } from './policy-node.ts';

const NAMESPACE = `hep-${process.pid}`;
const shared = sharedTeardowns(test);
/** A port no failsafe rule opens, another, and one they open (ssh). */
const CLOSED = ECHO_PORT;
const UNTRACKED = 9000;
const FAILSAFE_IN = 22;
/** Outbound: the router's etcd-client port is failsafe, its echo port is not. */
const FAILSAFE_OUT = 2379;
const POD_ADDRESS = '10.79.0.10';

let policyNode: PolicyNode;
let kube: Kube;
let custom: k8s.CustomObjectsApi;
let node: TestNode;
let router: Netns;

const hostEndpoints = { group: 'crd.projectnet.org', version: 'v1', plural: 'hostendpoints' };
const globalPolicies = { group: 'projectnet.org', version: 'v3', plural: 'globalnetworkpolicies' };

async function create(kind: 'HostEndpoint' | 'GlobalNetworkPolicy', name: string, spec: object, labels?: Record<string, string>) {
  const where = kind === 'HostEndpoint' ? hostEndpoints : globalPolicies;
  await custom.createClusterCustomObject({
    ...where,
    body: { apiVersion: `${where.group}/${where.version}`, kind, metadata: { name, ...(labels ? { labels } : {}) }, spec },
  });
  shared.teardown(() => custom.deleteClusterCustomObject({ ...where, name }).catch(() => undefined));
}

const remove = (kind: 'HostEndpoint' | 'GlobalNetworkPolicy', name: string) =>
  custom.deleteClusterCustomObject({ ...(kind === 'HostEndpoint' ? hostEndpoints : globalPolicies), name });

/** Connectivity of `what` settles on `expected`; a blocked one stays blocked for two more tries. */
async function settles(what: string, check: () => boolean, expected: boolean): Promise<boolean> {
  await eventually(`${what} ${expected ? 'connects' : 'is blocked'}`, () => check() === expected, {
    timeoutMs: 60_000,
    intervalMs: 200,
    context: () => policyNode.log().split('\n').slice(-20).join('\n'),
  });
  return expected || (!check() && !check());
}

const routerToNode = (port: number) => () => connectsTo(router, node.address, port);
const routerToPod = () => connectsTo(router, POD_ADDRESS, ECHO_PORT);
const nodeToRouter = (port: number) => () => connectsTo(node.netns, '172.30.1.254', port);

test.before(async () => {
  policyNode = await startPolicyNode(shared, 'hep1');
  ({ kube, node, router } = policyNode);
  custom = kube.config.makeApiClient(k8s.CustomObjectsApi);
  await kube.core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  shared.teardown(() => kube.core.deleteNamespace({ name: NAMESPACE }).catch(() => undefined));
  // The node's own services, the pod's, and the router's.
  for (const port of [CLOSED, UNTRACKED, FAILSAFE_IN]) echoListener(shared, node.netns, port);
  for (const port of [ECHO_PORT, FAILSAFE_OUT]) echoListener(shared, router, port);
  const pod = plugNetns(shared, node, `nphep-pod-${process.pid}`, POD_ADDRESS, hostInterfaceName('cali', `${NAMESPACE}.web`));
  echoListener(shared, pod);
  await createRunningPod(kube, {
    namespace: NAMESPACE,
    name: 'web',
    labels: { app: 'web' },
    nodeName: node.name,
    addresses: [POD_ADDRESS],
  });
  sh(router, `ip route add ${POD_ADDRESS}/32 via ${node.address}`);
  policyNode.startAgent();
});

test.afterEach.always((t) => {
  if (!t.passed) t.log(policyNode.log().split('\n').slice(-40).join('\n'));
});

test.serial('without a host endpoint the node is open; with one it is closed but for the failsafe ports', async (t) => {
  t.true(await settles('router → pod', routerToPod, true));
  t.true(await settles('router → node', routerToNode(CLOSED), true));
  t.true(await settles('node → router', nodeToRouter(ECHO_PORT), true));

  await create('HostEndpoint', 'hep1-eth0', { node: node.name, interfaceName: 'eth0', expectedIPs: [node.address] }, { role: 'edge' });
  t.true(await settles('router → node (no policy, no profile)', routerToNode(CLOSED), false));
  t.true(await settles('node → router (no policy, no profile)', nodeToRouter(ECHO_PORT), false));
  t.true(connectsTo(router, node.address, FAILSAFE_IN), 'inbound failsafe port (ssh)');
  t.true(connectsTo(node.netns, '172.30.1.254', FAILSAFE_OUT), 'outbound failsafe port (etcd)');
  // Forwarded traffic has no applyOnForward policy: allowed.
  t.true(routerToPod(), 'router → pod, forwarded');
  const listing = policyNode.nftList().stdout;
  t.regex(listing, /chain host-input \{/);
  t.regex(listing, /iifname "eth0" goto fh-eth0/);
  // Fail closed: with the agent stopped the kernel keeps the host endpoint closed, failsafe ports open.
  await policyNode.stopAgent();
  t.false(routerToNode(CLOSED)(), 'closed while the agent is stopped');
  t.true(connectsTo(router, node.address, FAILSAFE_IN), 'failsafe port open while the agent is stopped');
  policyNode.startAgent();
  t.true(await settles('router → pod after the restart', routerToPod, true));
});

test.serial('a normal policy opens the host; an applyOnForward one reaches forwarded traffic too', async (t) => {
  await create('GlobalNetworkPolicy', 'edge-in', {
    selector: "role == 'edge'",
    types: ['Ingress', 'Egress'],
    ingress: [{ action: 'Allow', protocol: 'TCP', destination: { ports: [CLOSED] } }],
    egress: [{ action: 'Allow', protocol: 'TCP', destination: { ports: [ECHO_PORT] } }],
  });
  t.true(await settles('router → node (allowed)', routerToNode(CLOSED), true));
  t.true(await settles('node → router (allowed)', nodeToRouter(ECHO_PORT), true));
  t.false(connectsTo(router, node.address, UNTRACKED), 'a port no rule allows stays closed');

  await create('GlobalNetworkPolicy', 'edge-forward', {
    selector: "role == 'edge'",
    order: 10,
    applyOnForward: true,
    types: ['Ingress'],
    ingress: [{ action: 'Deny', protocol: 'TCP', source: { nets: ['172.30.1.254/32'] }, destination: { ports: [ECHO_PORT] } }],
  });
  t.true(await settles('router → pod (applyOnForward deny)', routerToPod, false));
  t.true(await settles('router → node (the deny applies to the host too)', routerToNode(CLOSED), false));
  await remove('GlobalNetworkPolicy', 'edge-forward');
  t.true(await settles('router → pod (deny gone)', routerToPod, true));
  t.true(await settles('router → node (deny gone)', routerToNode(CLOSED), true));
});

test.serial('a preDNAT policy drops before DNAT; a doNotTrack one lets traffic through untracked', async (t) => {
  await create('GlobalNetworkPolicy', 'edge-pre-dnat', {
    selector: "role == 'edge'",
    preDNAT: true,
    applyOnForward: true,
    ingress: [{ action: 'Deny', protocol: 'TCP', source: { nets: ['172.30.1.254/32'] } }],
  });
  t.true(await settles('router → pod (preDNAT deny)', routerToPod, false));
  t.true(await settles('router → node (preDNAT deny)', routerToNode(CLOSED), false));
  t.true(connectsTo(router, node.address, FAILSAFE_IN), 'the failsafe port stays open before DNAT too');
  t.regex(policyNode.nftList().stdout, /chain host-pre-dnat \{\s*type filter hook prerouting priority mangle/);
  await remove('GlobalNetworkPolicy', 'edge-pre-dnat');
  t.true(await settles('router → node (preDNAT deny gone)', routerToNode(CLOSED), true));

  t.false(connectsTo(router, node.address, UNTRACKED), 'no policy allows the port yet');
  await create('GlobalNetworkPolicy', 'edge-untracked', {
    selector: "role == 'edge'",
    doNotTrack: true,
    applyOnForward: true,
    types: ['Ingress', 'Egress'],
    ingress: [{ action: 'Allow', protocol: 'TCP', destination: { ports: [UNTRACKED] } }],
    egress: [{ action: 'Allow', protocol: 'TCP', source: { ports: [UNTRACKED] } }],
  });
  // Both directions allowed untracked, and nothing else allows the port: only that path lets it through.
  t.true(await settles('router → node (doNotTrack allow)', routerToNode(UNTRACKED), true));
  t.regex(policyNode.nftList().stdout, /chain host-raw-prerouting \{\s*type filter hook prerouting priority raw/);
  await remove('GlobalNetworkPolicy', 'edge-untracked');
  t.true(await settles('router → node (doNotTrack allow gone)', routerToNode(UNTRACKED), false));
});

test.serial(
  'the all-interfaces endpoint is policed like a named one; its built-in allow-all profile allows what no policy decides',
  async (t) => {
    await create(
      'HostEndpoint',
      'hep1-all',
      { node: node.name, interfaceName: '*', profiles: ['projectnet-default-allow'] },
      { role: 'edge' },
    );
    await remove('HostEndpoint', 'hep1-eth0');
    await eventually('eth0 policed by the all-interfaces endpoint', () => {
      const listing = policyNode.nftList().stdout;
      return !listing.includes('goto fh-eth0') && /chain host-input \{[^}]*goto fh-[0-9a-f]{16}/s.test(listing);
    });
    // edge-in selects it too: its port open, the rest dropped at the end of the tier (the profile is not reached).
    t.true(await settles('router → node (edge-in)', routerToNode(CLOSED), true));
    t.true(await settles('router → node (no rule of edge-in)', routerToNode(UNTRACKED), false));
    await remove('GlobalNetworkPolicy', 'edge-in');
    // No policy selects it any more: the profile allows everything.
    t.true(await settles('router → node (allow-all profile)', routerToNode(UNTRACKED), true));
    t.true(await settles('node → router (allow-all profile)', nodeToRouter(ECHO_PORT), true));
    t.true(routerToPod(), 'router → pod');
    await remove('HostEndpoint', 'hep1-all');
    await eventually('no host chain left', () => !/host-input/.test(policyNode.nftList().stdout));
    t.true(routerToNode(CLOSED)());
  },
);

/**
 * In the router: a new connection to `address`:`port` every 20 ms, and one kept open echoing a
 * line every 20 ms; on SIGTERM prints how many of each failed.
 */
const PROBE = `
const net = require('node:net');
const [host, port] = [process.argv[1], Number(process.argv[2])];
let opened = 0, failed = 0, keptBroken = 0, keptEchoes = 0;
const tick = setInterval(() => {
  const s = net.connect({ host, port });
  const timer = setTimeout(() => { failed++; s.destroy(); }, 1000);
  s.on('error', () => { clearTimeout(timer); failed++; });
  s.on('connect', () => s.end('x'));
  s.on('data', () => { clearTimeout(timer); opened++; s.destroy(); });
}, 20);
const kept = net.connect({ host, port });
kept.on('error', () => keptBroken++);
kept.on('close', () => keptBroken++);
kept.on('data', () => keptEchoes++);
const ping = setInterval(() => kept.write('y'), 20);
process.on('SIGTERM', () => {
  clearInterval(tick); clearInterval(ping);
  setTimeout(() => { process.stdout.write(JSON.stringify({ opened, failed, keptBroken, keptEchoes })); process.exit(0); }, 1200);
});
`;

test.serial('migrating to automatic host endpoints drops no connection while traffic flows', async (t) => {
  await create('HostEndpoint', 'hep1-all', { node: node.name, interfaceName: '*', expectedIPs: [node.address] }, { role: 'edge' });
  await create('GlobalNetworkPolicy', 'edge-web', {
    selector: "role == 'edge'",
    ingress: [{ action: 'Allow', protocol: 'TCP', destination: { ports: [CLOSED] } }],
  });
  t.true(await settles('router → node (edge-web)', routerToNode(CLOSED), true));
  t.true(await settles('router → node (no rule of edge-web)', routerToNode(UNTRACKED), false));

  const probe = spawn('ip', ['netns', 'exec', router.name, process.execPath, '-e', PROBE, node.address, String(CLOSED)], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  shared.teardown(() => probe.kill('SIGKILL'));
  let counts = '';
  probe.stdout.setEncoding('utf8').on('data', (text: string) => {
    counts += text;
  });
  // netplug-kube-controllers' node controller, with its least-privilege identity, makes the automatic endpoint.
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-hep', [...CONTROLLER_RULES, ...CONTROLLER_DATASTORE_RULES]);
  const controllers = await startControllers(shared, {
    DATASTORE_TYPE: 'kubernetes',
    KUBECONFIG: identity.kubeconfig,
    ENABLED_CONTROLLERS: 'node',
  });
  // Spawned, not run synchronously: the controllers run in this process.
  const migrated = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(NETPLUGCTL, ['migrate', 'auto-host-endpoints', '--kubeconfig', kube.server.admin.kubeconfig, '--timeout', '60s'], {
      env: { PATH: '/usr/bin:/bin' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
    });
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr += text;
    });
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
  shared.teardown(() => custom.deleteClusterCustomObject({ ...hostEndpoints, name: `${node.name}-auto-hep` }).catch(() => undefined));
  t.is(migrated.status, 0, `${migrated.stderr}\n${controllers.lines.join('')}`);
  t.regex(migrated.stdout, /deleted host endpoint hep1-all/);
  // The automatic endpoint (the node's labels, now the old one's) is selected as the old one was.
  t.true(await settles('router → node (no rule of edge-web, automatic endpoint)', routerToNode(UNTRACKED), false));
  const exited = new Promise((resolve) => probe.once('exit', resolve));
  probe.kill('SIGTERM');
  await exited;
  const { opened = 0, failed = 0, keptBroken = 0, keptEchoes = 0 } = JSON.parse(counts) as Record<string, number>;
  t.log(`during the migration: ${opened} new connections, ${keptEchoes} echoes on the one kept open`);
  t.is(failed, 0, `${failed} of ${opened + failed} new connections failed`);
  t.is(keptBroken, 0, 'the connection kept open throughout was not broken');
  t.true(opened > 0 && keptEchoes > 0);
});
