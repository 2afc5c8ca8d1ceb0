// Automatic host endpoints, on each datastore: netplug-kube-controllers creates
// KubeControllersConfiguration default (autoCreate Disabled) and makes no host endpoint until
// autoCreate is Enabled; then keeps `<node>-auto-hep` per Kubernetes Node (all interfaces, the
// node's labels plus created-by, its InternalIPs, the allow-all profile), following label and
// address changes, new and deleted nodes, and deletes them all when autoCreate is Disabled again.
// Host endpoints without the created-by label are never touched, even one named like an automatic
// one. The controllers run as the least-privilege identity of the other controller tests, whose
// rules are checked against the shipped ClusterRole. Real kube-apiserver (Nodes, and the custom
// resources with the Kubernetes datastore), real etcd.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';
import * as k8s from '@kubernetes/client-node';

import {
  autoHostEndpointName,
  listHostEndpoints,
  newDocument,
  readConfiguration,
} from '../../ts/controllers/auto-host-endpoints-resources.ts';
import { CONFIGURATION_KEY } from '../../ts/model/kube-controllers-configuration.ts';
import { hostEndpointKey, type HostEndpoint } from '../../ts/model/host-endpoint.ts';
import { openKubeClient } from '../../ts/k8s/client.ts';
import { CONTROLLERS } from '../../ts/render/objects.ts';
import { renderRbac } from '../../ts/render/rbac.ts';
import { KubeStore } from '../../ts/store/kubernetes/store.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Entry, Store } from '../../ts/store/store.ts';
import { ROOT } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { createNode as createNodeFor, installCrds, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import { CONTROLLER_DATASTORE_RULES, CONTROLLER_ETCD_RULES, CONTROLLER_RULES, controllersIdentity, startControllers } from './fixtures.ts';

const GROUP = 'crd.projectnet.org';
const shared = sharedTeardowns(test);
let kube: Kube;
let custom: k8s.CustomObjectsApi;

test.before(async () => {
  kube = await startKube(shared);
  await installCrds(kube);
  custom = kube.custom;
});

type Rule = { apiGroups?: string[]; resources?: string[]; verbs: string[] };
const grants = (rules: readonly Rule[]) =>
  new Set(
    rules.flatMap((rule) =>
      (rule.apiGroups ?? []).flatMap((group) =>
        (rule.resources ?? []).flatMap((resource) => rule.verbs.map((verb) => `${group}/${resource}:${verb}`)),
      ),
    ),
  ).values();

test('the identity the controller tests run as holds exactly the shipped ClusterRole of netplug-kube-controllers', (t) => {
  for (const [datastore, rules] of [
    ['etcdv3', [...CONTROLLER_RULES, ...CONTROLLER_ETCD_RULES]],
    ['kubernetes', [...CONTROLLER_RULES, ...CONTROLLER_DATASTORE_RULES]],
  ] as const) {
    const role = renderRbac({ datastore, namespace: 'kube-system', image: 'netplug:test' }).find(
      (object) => object.kind === 'ClusterRole' && object.metadata.name === CONTROLLERS,
    ) as { rules: Rule[] } | undefined;
    t.deepEqual([...grants(rules as Rule[])].sort(), [...grants(role?.rules ?? [])].sort(), datastore);
  }
});

const createNode = (t: ExecutionContext, name: string, labels: Record<string, string>, addresses: string[]) =>
  createNodeFor(kube, t, name, labels, {
    addresses: [...addresses.map((address) => ({ type: 'InternalIP', address })), { type: 'Hostname', address: name }],
  });

const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

async function setNodeLabels(name: string, labels: Record<string, string | null>) {
  await kube.core.patchNode({ name, body: { metadata: { labels } } }, mergePatch);
}

async function setNodeAddresses(name: string, addresses: string[]) {
  const body = { status: { addresses: addresses.map((address) => ({ type: 'InternalIP', address })) } };
  await kube.core.patchNodeStatus({ name, body }, mergePatch);
}

/** What a user would write: a host endpoint without the created-by label. */
async function createUserEndpoint(store: Store, name: string, spec: HostEndpoint['spec'], labels: Record<string, string>) {
  if (!(await store.commit([{ key: hostEndpointKey(name), create: newDocument('HostEndpoint', name, labels, spec) }])))
    throw new Error(`${name} exists`);
}

const byName = async (store: Store) => new Map((await listHostEndpoints(store)).map((entry) => [entry.value.metadata.name, entry]));
const automaticNames = async (store: Store) =>
  [...(await byName(store)).values()]
    .filter((entry) => entry.value.metadata.labels?.['projectnet.org/created-by'] === 'netplug-kube-controllers')
    .map((entry) => entry.value.metadata.name)
    .sort();

const sorted = (labels: Record<string, string> = {}) => JSON.stringify(Object.entries(labels).sort(([x], [y]) => (x < y ? -1 : 1)));

function isAutoEndpointOf(entry: Entry<HostEndpoint> | undefined, node: string, labels: Record<string, string>, ips: string[]) {
  if (!entry) return false;
  const { metadata, spec } = entry.value;
  return (
    metadata.name === `${node}-auto-hep` &&
    sorted(metadata.labels) === sorted({ ...labels, 'projectnet.org/created-by': 'netplug-kube-controllers' }) &&
    spec.node === node &&
    spec.interfaceName === '*' &&
    JSON.stringify(spec.expectedIPs) === JSON.stringify(ips) &&
    JSON.stringify(spec.profiles) === JSON.stringify(['projectnet-default-allow'])
  );
}

async function automaticHostEndpoints(
  t: ExecutionContext,
  store: Store,
  env: Record<string, string>,
  setAutoCreate: (value: 'Enabled' | 'Disabled') => Promise<void>,
  label: string,
  /** The automatic ones as `kubectl get -l` lists them (the Kubernetes datastore). */
  kubectlGetAutomatic?: () => string,
) {
  const [a, b, c] = [`hep-${label}-a`, `hep-${label}-b`, `hep-${label}-c`];
  await createNode(t, a, { zone: 'z1', 'kubernetes.io/hostname': a }, ['10.0.0.1', 'fd00::1']);
  await createNode(t, b, { zone: 'z2' }, ['10.0.0.2']);
  // A user's host endpoints: one on all of a's interfaces, one squatting b's automatic name.
  await createUserEndpoint(store, `${a}-all`, { node: a, interfaceName: '*', expectedIPs: ['10.0.0.1'] }, { env: 'dev' });
  await createUserEndpoint(store, `${b}-auto-hep`, { node: b, interfaceName: 'eth0' }, { mine: 'yes' });
  const users = async () => {
    const found = await byName(store);
    return [`${a}-all`, `${b}-auto-hep`].map((name) => found.get(name)?.revision);
  };
  const usersBefore = await users();

  const controllers = await startControllers(t, { ...env, ENABLED_CONTROLLERS: 'node' });
  await eventually('KubeControllersConfiguration default created, Disabled, and running so', async () => {
    const configuration = await readConfiguration(store);
    return (
      configuration?.value.spec.controllers?.node?.hostEndpoint?.autoCreate === 'Disabled' &&
      configuration.value.status?.runningConfig?.controllers?.node?.hostEndpoint?.autoCreate === 'Disabled'
    );
  });
  t.deepEqual(await automaticNames(store), [], 'no automatic host endpoint while Disabled');

  await setAutoCreate('Enabled');
  await eventually('a has its automatic host endpoint', async () =>
    isAutoEndpointOf((await byName(store)).get(`${a}-auto-hep`), a, { zone: 'z1', 'kubernetes.io/hostname': a }, ['10.0.0.1', 'fd00::1']),
  );
  t.is(
    (await readConfiguration(store))?.value.status?.runningConfig?.controllers?.node?.hostEndpoint?.autoCreate,
    'Enabled',
    'status.runningConfig says what runs',
  );
  t.deepEqual(await automaticNames(store), [`${a}-auto-hep`], "b's name is taken by a user's host endpoint: b gets none");
  await controllers.logged("that b's name is taken", `host endpoint ${b}-auto-hep exists without label projectnet.org/created-by`);
  if (kubectlGetAutomatic) t.is(kubectlGetAutomatic(), `hostendpoint.crd.projectnet.org/${a}-auto-hep\n`);

  await setNodeLabels(a, { zone: 'z9', rack: 'r1' });
  await eventually('the labels follow the node', async () =>
    isAutoEndpointOf((await byName(store)).get(`${a}-auto-hep`), a, { zone: 'z9', 'kubernetes.io/hostname': a, rack: 'r1' }, [
      '10.0.0.1',
      'fd00::1',
    ]),
  );
  await setNodeAddresses(a, ['10.0.0.11']);
  await eventually('the expected IPs follow the node', async () =>
    isAutoEndpointOf((await byName(store)).get(`${a}-auto-hep`), a, { zone: 'z9', 'kubernetes.io/hostname': a, rack: 'r1' }, ['10.0.0.11']),
  );

  await createNode(t, c, {}, ['10.0.0.3']);
  await eventually('a new node gets one', async () => isAutoEndpointOf((await byName(store)).get(`${c}-auto-hep`), c, {}, ['10.0.0.3']));
  await kube.core.deleteNode({ name: c });
  await eventually("a deleted node's is deleted", async () => !(await byName(store)).has(`${c}-auto-hep`));
  await controllers.logged("the deleted node's deletion", `deleted host endpoint ${c}-auto-hep: node ${c} was deleted`);

  // The user's squatter removed: b gets its own.
  const squatter = (await byName(store)).get(`${b}-auto-hep`) as Entry<HostEndpoint>;
  t.true(await store.commit([{ key: squatter.key, remove: true, revision: squatter.revision }]));
  await createUserEndpoint(store, `${b}-eth0`, { node: b, interfaceName: 'eth0' }, { mine: 'yes' });
  await setNodeLabels(b, { zone: 'z3' }); // a node event: the next pass comes now rather than within the period
  await eventually('b gets its automatic host endpoint once the name is free', async () =>
    isAutoEndpointOf((await byName(store)).get(`${b}-auto-hep`), b, { zone: 'z3' }, ['10.0.0.2']),
  );

  await setAutoCreate('Disabled');
  await eventually('Disabled: every automatic host endpoint is deleted', async () => (await automaticNames(store)).length === 0);
  t.is((await readConfiguration(store))?.value.status?.runningConfig?.controllers?.node?.hostEndpoint?.autoCreate, 'Disabled');
  t.is((await users())[0], usersBefore[0], "the user's all-interfaces host endpoint was never written");
  t.truthy((await byName(store)).get(`${b}-eth0`), "nor the user's other one deleted");
  t.is(await controllers.stop(), 0);
}

test.serial('Kubernetes datastore: automatic host endpoints follow the nodes while Enabled, and only then', async (t) => {
  const store = new KubeStore(await openKubeClient({ kubeconfig: kube.server.admin.kubeconfig }));
  t.teardown(() => store.close());
  t.teardown(() => deleteAll(store));
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-hep-kdd', [
    ...CONTROLLER_RULES,
    ...CONTROLLER_DATASTORE_RULES,
  ]);
  // The specification's step, with kubectl as the README gives it.
  const setAutoCreate = async (autoCreate: 'Enabled' | 'Disabled') => {
    const patch = JSON.stringify({ spec: { controllers: { node: { hostEndpoint: { autoCreate } } } } });
    kubectl('patch', 'kubecontrollersconfigurations.crd.projectnet.org', 'default', '--type=merge', '-p', patch);
  };
  await automaticHostEndpoints(t, store, { DATASTORE_TYPE: 'kubernetes', KUBECONFIG: identity.kubeconfig }, setAutoCreate, 'kdd', () =>
    kubectl('get', 'hostendpoints.crd.projectnet.org', '-l', 'projectnet.org/created-by=netplug-kube-controllers', '-o', 'name'),
  );
});

test.serial('etcd datastore: automatic host endpoints follow the nodes while Enabled, and only then', async (t) => {
  const etcd = await startEtcd(t);
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-hep-etcd', CONTROLLER_RULES);
  const setAutoCreate = async (autoCreate: 'Enabled' | 'Disabled') => {
    const found = await readConfiguration(store);
    if (!found) throw new Error('no KubeControllersConfiguration default');
    const spec = { ...found.value.spec, controllers: { node: { hostEndpoint: { autoCreate } } } };
    if (!(await store.commit([{ key: found.key, update: { ...found.value, spec }, revision: found.revision }])))
      throw new Error('conflict');
  };
  await automaticHostEndpoints(
    t,
    store,
    { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: etcd.endpoints, KUBECONFIG: identity.kubeconfig },
    setAutoCreate,
    'etcd',
  );
});

test.serial('the API server refuses host endpoints and configurations the controllers could not use, naming the field', async (t) => {
  const refused = async (plural: string, kind: string, name: string, spec: unknown) => {
    try {
      await custom.createClusterCustomObject({
        group: GROUP,
        version: 'v1',
        plural,
        body: { apiVersion: `${GROUP}/v1`, kind, metadata: { name }, spec },
      });
    } catch (err) {
      const body = (err as { body?: unknown }).body;
      return (JSON.parse(typeof body === 'string' ? body : '{}') as { message?: string }).message ?? '';
    }
    await custom.deleteClusterCustomObject({ group: GROUP, version: 'v1', plural, name });
    return 'accepted';
  };
  const kcc = (autoCreate: string) => ({ controllers: { node: { hostEndpoint: { autoCreate } } } });
  t.regex(
    await refused('kubecontrollersconfigurations', 'KubeControllersConfiguration', 'default', kcc('enabled')),
    /spec\.controllers\.node\.hostEndpoint\.autoCreate.*Unsupported value: "enabled"/,
  );
  t.regex(
    await refused('kubecontrollersconfigurations', 'KubeControllersConfiguration', 'other', kcc('Enabled')),
    /only the KubeControllersConfiguration named default/,
  );
  t.regex(
    await refused('hostendpoints', 'HostEndpoint', 'h1', { node: 'n', interfaceName: '*', expectedIPs: ['10.0.0.300'] }),
    /spec\.expectedIPs\[0\].*must be an IP address/,
  );
  t.regex(await refused('hostendpoints', 'HostEndpoint', 'h2', { node: 'n' }), /needs interfaceName or expectedIPs/);
  t.regex(
    await refused('hostendpoints', 'HostEndpoint', 'h3', {
      node: 'n',
      interfaceName: '*',
      ports: [{ name: 'p', protocol: 'ICMP', port: 1 }],
    }),
    /spec\.ports\[0\]\.protocol/,
  );
  t.is(
    await refused('hostendpoints', 'HostEndpoint', 'h4', {
      node: 'n',
      interfaceName: '*',
      expectedIPs: ['fd00::1'],
      ports: [{ name: 'http', protocol: 'TCP', port: 80 }],
    }),
    'accepted',
  );
  t.is(await refused('kubecontrollersconfigurations', 'KubeControllersConfiguration', 'default', kcc('Enabled')), 'accepted');
});

function kubectl(...args: string[]): string {
  const binaries = execFileSync('sh', [join(ROOT, 'scripts/kube-binaries.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return execFileSync(join(binaries.trim(), 'kubectl'), [`--kubeconfig=${kube.server.admin.kubeconfig}`, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** The Kubernetes datastore's host endpoints and configuration, removed after the test. */
async function deleteAll(store: Store) {
  for (const entry of await listHostEndpoints(store)) await store.commit([{ key: entry.key, remove: true, revision: entry.revision }]);
  const configuration = await store.get(CONFIGURATION_KEY);
  if (configuration) await store.commit([{ key: CONFIGURATION_KEY, remove: true, revision: configuration.revision }]);
}

test('automatic host endpoint names: <node>-auto-hep, hashed to a valid name when too long', (t) => {
  t.is(autoHostEndpointName('node-1'), 'node-1-auto-hep');
  const long = `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(60)}.example`;
  const name = autoHostEndpointName(long);
  t.true(name.length <= 253 && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name), name);
  t.not(name, autoHostEndpointName(`${long}x`), 'distinct nodes, distinct names');
});
