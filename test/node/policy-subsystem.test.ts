// The policy subsystem's parts without a kernel or an API server: the feed (followed objects →
// compiler), the pass (part to the composer, then status files), the CNI hook, the settings.
// Informers are in-memory caches, the composer a recorder of parts; status files go to a
// temporary directory. policy-enforcement.test.ts proves the same with real packets.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';
import type * as k8s from '@kubernetes/client-node';
import { Registry } from 'prom-client';

import { Logger } from '../../ts/log/logger.ts';
import type { TablePart } from '../../ts/nft/model.ts';
import { programNetworkedPod } from '../../ts/node/policy/program-networked-pod.ts';
import { EngineFeed } from '../../ts/node/policy/feed-engine.ts';
import { FOLLOWED_KINDS, objectKey, type FollowedKind, type PolicyInformers } from '../../ts/node/policy/follow-resources.ts';
import { PolicyMetrics } from '../../ts/node/policy/policy-metrics.ts';
import { PolicyProgrammer, type NewIssue } from '../../ts/node/policy/program-policy.ts';
import { issueMessage, issueTarget } from '../../ts/node/policy/report-issues.ts';
import { StatusFiles } from '../../ts/node/policy/write-status-files.ts';
import { nodeSettings } from '../../ts/node/shared/settings.ts';
import { statusFileName } from '../../ts/plugin/policy-wait.ts';
import { PolicyEngine } from '../../ts/policy/engine.ts';
import type { Handler, Informer } from '../../ts/runtime/informers.ts';
import { requireBuilt, tempDir } from '../helpers/cni.ts';

type Obj = k8s.KubernetesObject & Record<string, unknown>;

/** An informer's cache in memory: `put` and `drop` tell the handlers as a watch would. */
class MemoryInformer implements Informer<k8s.KubernetesObject> {
  readonly what = 'memory';
  readonly objects = new Map<string, k8s.KubernetesObject>();
  readonly handlers: Handler<k8s.KubernetesObject>[] = [];
  get(name: string, namespace?: string) {
    return this.objects.get(namespace ? `${namespace}/${name}` : name);
  }
  list() {
    return [...this.objects.values()];
  }
  synced() {
    return true;
  }
  whenSynced() {
    return Promise.resolve();
  }
  addHandler(handler: Handler<k8s.KubernetesObject>) {
    this.handlers.push(handler);
    return () => undefined;
  }
  put(object: Obj) {
    this.objects.set(objectKey(object), object);
  }
  drop(object: Obj) {
    this.objects.delete(objectKey(object));
  }
}

const NODE = 'n1';
const log = new Logger('test', () => undefined, process.pid);

function setUp(t: ExecutionContext) {
  const informers = Object.fromEntries(FOLLOWED_KINDS.map((kind) => [kind, new MemoryInformer()])) as unknown as Record<
    FollowedKind,
    MemoryInformer
  >;
  const engine = new PolicyEngine({ nodeName: NODE, interfacePrefix: 'cali' });
  const feed = new EngineFeed(engine, informers as unknown as PolicyInformers, { nodeName: NODE, interfacePrefix: 'cali', log });
  const registry = new Registry();
  const metrics = new PolicyMetrics(registry);
  const parts: TablePart[] = [];
  const prefix = tempDir(t, 'policy');
  const files = new StatusFiles(prefix);
  const table = {
    setPart: async (name: string, part: TablePart) => {
      t.is(name, 'policy');
      parts.push(part);
      return 'applied' as const;
    },
  };
  const issues: NewIssue[] = [];
  const onNewIssue = (issue: NewIssue) => issues.push(issue);
  const programmer = new PolicyProgrammer({ feed, table, files, metrics, log, repairMs: 3_600_000, onNewIssue });
  const pass = async () => {
    feed.markWhole();
    return programmer.exclusive(() => programmer.pass());
  };
  const put = (kind: FollowedKind, object: Obj) => {
    informers[kind].put(object);
    feed.mark(kind, objectKey(object));
  };
  const drop = (kind: FollowedKind, object: Obj) => {
    informers[kind].drop(object);
    feed.mark(kind, objectKey(object));
  };
  const dispatched = () => (parts.at(-1)?.maps ?? []).find((m) => m.name === 'to-wl')?.elements?.map((e) => e.key) ?? [];
  const gauge = async (name: string) => (await registry.getSingleMetric(name)?.get())?.values[0]?.value;
  const dir = join(prefix, 'endpoint-status');
  return { informers, engine, feed, programmer, parts, files, dir, pass, put, drop, dispatched, gauge, issues };
}

const pod = (name: string, labels: Record<string, string>, ip: string | undefined, node = NODE): Obj => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'shop', uid: `uid-${name}`, labels },
  spec: { nodeName: node, containers: [] },
  status: ip ? { phase: 'Running', podIP: ip, podIPs: [{ ip }] } : { phase: 'Pending' },
});
const namespace: Obj = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { team: 'a' } } };

test.before(() => requireBuilt());

test('a local pod with its address gets its chains, then its status file; a pod gone loses both; stale files are swept', async (t) => {
  const s = setUp(t);
  mkdirSync(s.dir, { recursive: true });
  writeFileSync(join(s.dir, 'k8s stale%2Fpod eth0'), '{}');
  s.put('Namespace', namespace);
  s.put('Pod', pod('web', { app: 'web' }, '10.65.0.5'));
  s.put('Pod', pod('far', { app: 'far' }, '10.65.9.9', 'n2'));
  s.put('Pod', pod('starting', { app: 'starting' }, undefined));
  t.is(await s.pass(), 'written');
  const web = s.engine.programmedInterface('shop/web') as string;
  t.regex(web, /^cali[0-9a-f]{11}$/);
  t.true(s.dispatched().includes(web));
  t.is(s.engine.programmedInterface('shop/far'), undefined, "another node's pod is a peer only");
  // A pod without an address yet is dispatched (its chains drop what it sends) but has no file.
  t.deepEqual(readdirSync(s.dir), [statusFileName('k8s', 'shop', 'web', 'eth0')]);
  t.is(
    readFileSync(join(s.dir, statusFileName('k8s', 'shop', 'web', 'eth0')), 'utf8'),
    JSON.stringify({ ifaceName: web, ipv4Nets: ['10.65.0.5/32'] }),
  );
  t.is(await s.gauge('netplug_policy_endpoints_programmed'), 2);
  t.is(await s.pass(), 'unchanged', 'nothing changed: nothing written');

  s.drop('Pod', pod('web', { app: 'web' }, '10.65.0.5'));
  t.is(await s.programmer.exclusive(() => s.programmer.pass()), 'written');
  t.false(s.dispatched().includes(web));
  t.deepEqual(readdirSync(s.dir), []);
});

test('a networked pod is programmed before its ADD waits and answers, with the ADD’s interface, addresses and MAC', async (t) => {
  const s = setUp(t);
  s.put('Namespace', namespace);
  s.put('Pod', pod('api', { app: 'api' }, undefined));
  const { workloadNetworked: networked } = programNetworkedPod({
    feed: s.feed,
    programmer: s.programmer,
    pods: s.informers.Pod,
    readPod: () => Promise.reject(new Error('the watch holds every pod here')),
    passSoon: () => undefined,
    log,
  });
  const api = {
    namespace: 'shop',
    pod: 'api',
    podUid: 'uid-api',
    containerInterface: 'eth0',
    hostInterface: 'caliaddedpod01',
    mac: '02:00:00:00:00:01',
    addresses: ['10.65.0.7'],
  };
  // Before the first pass the ADD goes on at once; the first pass then programs the pod as the ADD made it.
  await networked(api);
  t.is(s.parts.length, 0);
  await s.pass();
  t.true(s.dispatched().includes('caliaddedpod01'));
  const file = join(s.dir, statusFileName('k8s', 'shop', 'api', 'eth0'));
  t.deepEqual(JSON.parse(readFileSync(file, 'utf8')), {
    ifaceName: 'caliaddedpod01',
    mac: '02:00:00:00:00:01',
    ipv4Nets: ['10.65.0.7/32'],
  });

  // Once programming runs, a pod is programmed (and its file written) before the call resolves.
  s.put('Pod', pod('db', { app: 'db' }, undefined));
  await networked({
    namespace: 'shop',
    pod: 'db',
    containerInterface: 'eth0',
    hostInterface: 'calidbpod00001',
    mac: '02:00:00:00:00:02',
    addresses: ['10.65.0.8'],
  });
  t.true(s.dispatched().includes('calidbpod00001'));
  t.true(existsSync(join(s.dir, statusFileName('k8s', 'shop', 'db', 'eth0'))));
  const egress = s.parts.at(-1)?.chains?.find((c) => c.name === 'fw-calidbpod00001');
  t.regex(JSON.stringify(egress), /10\.65\.0\.8/, 'its egress chain lets it send from its address');
  // The kubelet then writes the pod's status: the same address, nothing to change.
  s.put('Pod', pod('db', { app: 'db' }, '10.65.0.8'));
  t.is(await s.programmer.exclusive(() => s.programmer.pass()), 'unchanged');
});

test('a planned pod is programmed while its ADD commits, the networked call then finds it done; a failed ADD withdraws its addresses', async (t) => {
  const s = setUp(t);
  s.put('Namespace', namespace);
  s.put('Pod', pod('web', { app: 'web' }, undefined));
  await s.pass();
  let passesAsked = 0;
  const { workloadPlanned: planned, workloadNetworked: networked } = programNetworkedPod({
    feed: s.feed,
    programmer: s.programmer,
    pods: s.informers.Pod,
    readPod: () => Promise.reject(new Error('the watch holds every pod here')),
    passSoon: () => passesAsked++,
    log,
  });
  const web = {
    namespace: 'shop',
    pod: 'web',
    podUid: 'uid-web',
    containerInterface: 'eth0',
    hostInterface: 'caliplannedweb',
    mac: '0a:58:0a:41:00:09',
    addresses: ['10.65.0.9'],
  };
  const file = join(s.dir, statusFileName('k8s', 'shop', 'web', 'eth0'));
  const withdraw = planned(web);
  // The planned pass runs in line, in the background: once the line is through, the pod is in the kernel and filed.
  await s.programmer.exclusive(() => Promise.resolve());
  t.true(s.dispatched().includes('caliplannedweb'));
  t.regex(JSON.stringify(s.parts.at(-1)?.chains?.find((c) => c.name === 'fw-caliplannedweb')), /10\.65\.0\.9/);
  t.true(existsSync(file));
  const written = s.parts.length;
  await networked(web);
  t.is(s.parts.length, written, 'the networked call finds the pod programmed: nothing more to write');

  // A failed ADD withdraws what it planned: the pod is back to what the watch says (no address: no file).
  withdraw();
  t.is(passesAsked, 1);
  t.is(await s.programmer.exclusive(() => s.programmer.pass()), 'written');
  t.notRegex(JSON.stringify(s.parts.at(-1)?.chains?.find((c) => c.name === 'fw-caliplannedweb') ?? {}), /10\.65\.0\.9/);
  t.false(existsSync(file));
});

test('a Kubernetes NetworkPolicy as client-node lists it (`_from`) keeps its peers', async (t) => {
  const s = setUp(t);
  s.put('Namespace', namespace);
  s.put('Pod', pod('web', { app: 'web' }, '10.65.0.5'));
  s.put('Pod', pod('lb', { app: 'lb' }, '10.65.3.3', 'n2'));
  const policy = (rule: Record<string, unknown>): Obj => ({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: 'from-lb', namespace: 'shop' },
    spec: { podSelector: { matchLabels: { app: 'web' } }, ingress: [rule] },
  });
  const peers = [{ podSelector: { matchLabels: { app: 'lb' } } }];
  const partWith = async (rule: Record<string, unknown>) => {
    s.put('KubernetesNetworkPolicy', policy(rule));
    await s.pass();
    return JSON.stringify(s.parts.at(-1));
  };
  const watched = await partWith({ from: peers });
  const listed = await partWith({ _from: peers });
  const fromAnywhere = await partWith({});
  t.is(listed, watched);
  t.not(listed, fromAnywhere);
});

test('a policy that cannot be programmed is counted and told once, naming the field and value; the others are programmed', async (t) => {
  const s = setUp(t);
  s.put('Namespace', namespace);
  s.put('Pod', pod('web', { app: 'web' }, '10.65.0.5'));
  const gnp = (name: string, selector: string): Obj => ({
    apiVersion: 'projectnet.org/v3',
    kind: 'GlobalNetworkPolicy',
    metadata: { name, uid: 'x', resourceVersion: '5', creationTimestamp: new Date('2026-01-01T00:00:00Z') },
    spec: { selector, ingress: [{ action: 'Deny' }] },
  });
  s.put('GlobalNetworkPolicy', gnp('good', "app == 'web'"));
  s.put('GlobalNetworkPolicy', gnp('bad', "app == 'web"));
  t.is(await s.pass(), 'written');
  t.deepEqual(s.engine.endpointPolicies('shop/web').ingress, ['GlobalNetworkPolicy/good']);
  t.is(await s.gauge('netplug_policy_issues'), 1);
  t.is(await s.gauge('netplug_policy_issues_total'), 1);
  t.is(await s.gauge('netplug_policy_policies_programmed'), 1, 'the good policy');
  await s.pass();
  t.is(s.issues.length, 1, 'told once while it lasts');
  t.is(s.issues[0]?.resource, 'GlobalNetworkPolicy/bad');
  t.regex(
    issueMessage(s.issues[0] as NewIssue, NODE),
    /^node n1 cannot program GlobalNetworkPolicy\/bad: field "spec\.selector" is not a selector: selector "app == 'web"/,
  );
  s.drop('GlobalNetworkPolicy', gnp('bad', ''));
  await s.pass();
  t.is(await s.gauge('netplug_policy_issues'), 0);
});

test('a problem is reported on its object; on etcd on the Kubernetes NetworkPolicy a datastore policy came from, else on the Node', (t) => {
  const projectnet = { apiVersion: 'projectnet.org/v3', kind: 'NetworkPolicy', namespace: 'shop', name: 'p' };
  t.like(issueTarget('NetworkPolicy/shop/p', 'kubernetes'), { object: projectnet, kind: 'NetworkPolicy', key: 'shop/p' });
  t.like(issueTarget('GlobalNetworkPolicy/g', 'kubernetes'), { object: { kind: 'GlobalNetworkPolicy', name: 'g' }, key: 'g' });
  const knp = { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', namespace: 'shop', name: 'deny' };
  t.like(issueTarget('KubernetesNetworkPolicy/shop/deny', 'kubernetes'), {
    object: knp,
    kind: 'KubernetesNetworkPolicy',
    key: 'shop/deny',
  });
  t.like(issueTarget('NetworkPolicy/shop/knp.default.deny', 'kubernetes'), {
    object: knp,
    kind: 'KubernetesNetworkPolicy',
    key: 'shop/deny',
  });
  // On etcd the uid is the mirror's, which is the NetworkPolicy's.
  t.like(issueTarget('NetworkPolicy/shop/knp.default.deny', 'etcdv3'), {
    object: knp,
    kind: 'NetworkPolicy',
    key: 'shop/knp.default.deny',
  });
  t.is(issueTarget('NetworkPolicy/shop/p', 'etcdv3'), 'node');
  t.is(issueTarget('Profile/kns.shop', 'kubernetes'), 'node');
});

test('settings: enforcement is off by default, on either datastore, and has its status prefix and interface prefix', (t) => {
  const base = { NODENAME: 'n1' };
  const settings = nodeSettings(base);
  t.false(settings.policyEnforcement);
  t.is(settings.endpointStatusPathPrefix, '/var/run/netplug');
  t.is(settings.interfacePrefix, 'cali');
  t.true(nodeSettings({ ...base, DATASTORE_TYPE: 'kubernetes', NETPLUG_POLICY_ENFORCEMENT: 'true' }).policyEnforcement);
  t.true(
    nodeSettings({ ...base, NETPLUG_POLICY_ENFORCEMENT: 'true' }).policyEnforcement,
    'on etcd, from the datastore (follow-datastore.ts)',
  );
  t.throws(() => nodeSettings({ ...base, NETPLUG_ENDPOINT_STATUS_PATH_PREFIX: 'relative' }), {
    message: /NETPLUG_ENDPOINT_STATUS_PATH_PREFIX "relative" must be an absolute path/,
  });
  t.is(nodeSettings({ ...base, FELIX_INTERFACEPREFIX: 'tap,cali' }).interfacePrefix, 'tap');
  t.throws(() => nodeSettings({ ...base, FELIX_INTERFACEPREFIX: 'muchtoolongprefix' }), { message: /FELIX_INTERFACEPREFIX/ });
});

test('host endpoints are fed from their documents: this node’s programmed, a broken one reported and the one before kept', async (t) => {
  const s = setUp(t);
  const hostEndpoint = (name: string, spec: Record<string, unknown>): Obj => ({
    apiVersion: 'crd.projectnet.org/v1',
    kind: 'HostEndpoint',
    metadata: { name, labels: { role: 'edge' } },
    spec,
  });
  s.put('HostEndpoint', hostEndpoint('n1-eth0', { node: NODE, interfaceName: 'eth0', expectedIPs: ['192.0.2.1'] }));
  s.put('HostEndpoint', hostEndpoint('n2-eth0', { node: 'n2', interfaceName: 'eth0', expectedIPs: ['192.0.2.2'] }));
  t.is(await s.pass(), 'written');
  const chains = () => (s.parts.at(-1)?.chains ?? []).map((c) => c.name);
  t.true(chains().includes('fh-eth0'));
  t.true(chains().includes('host-input'));
  s.put('HostEndpoint', hostEndpoint('n1-eth0', { node: NODE, interfaceName: 'eth0', expectedIPs: 'not a list' }));
  await s.pass();
  t.regex(s.feed.resourceIssues().get('HostEndpoint/n1-eth0')?.[0] ?? '', /expectedIPs/);
  t.true(chains().includes('fh-eth0'), 'the endpoint as it was stays programmed');
  s.drop('HostEndpoint', hostEndpoint('n1-eth0', {}));
  await s.pass();
  t.false(chains().includes('host-input'), 'no host endpoint of this node: no host chain');
});

test('settings: failsafe ports, with the metrics port when it listens beyond loopback; a bad entry is named', (t) => {
  const base = { NODENAME: 'n1' };
  const inbound = (env: Record<string, string>) => nodeSettings({ ...base, ...env }).failsafe.inbound.map((p) => `${p.protocol}:${p.port}`);
  t.true(inbound({}).includes('tcp:22') && inbound({}).includes('tcp:10250'));
  t.deepEqual(inbound({ NETPLUG_FAILSAFE_INBOUND_HOST_PORTS: 'tcp:2222', NETPLUG_METRICS_ADDR: ':9091' }), ['tcp:2222', 'tcp:9091']);
  t.deepEqual(inbound({ NETPLUG_FAILSAFE_INBOUND_HOST_PORTS: 'none' }), []);
  t.deepEqual(nodeSettings({ ...base, NETPLUG_FAILSAFE_OUTBOUND_HOST_PORTS: 'udp:53' }).failsafe.outbound, [{ protocol: 'udp', port: 53 }]);
  t.throws(() => nodeSettings({ ...base, NETPLUG_FAILSAFE_INBOUND_HOST_PORTS: 'tcp:22,sctp:9' }), {
    message: /NETPLUG_FAILSAFE_INBOUND_HOST_PORTS "tcp:22,sctp:9" must be a list of <tcp\|udp>:<port>.*"sctp:9"/,
  });
});
