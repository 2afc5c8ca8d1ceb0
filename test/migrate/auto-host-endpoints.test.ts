// netplugctl migrate auto-host-endpoints end to end, on each datastore, through netplugctl's
// cluster-command dispatch (in-process): a label conflict refuses with every conflict listed and
// nothing changed; --overwrite with no controllers running labels the nodes, enables autoCreate
// and times out naming the missing automatic host endpoints, old ones untouched; a dry run changes
// nothing; with netplug-kube-controllers running (least-privilege identity) the migration
// completes (labels on the nodes and so on the automatic host endpoints, the old all-interfaces
// ones deleted, others kept), and a second run reports nothing to do. Real kube-apiserver with
// netplug's CRDs, real etcd, real netplug-kube-controllers; Node objects (no kubelet).
import { spawnSync } from 'node:child_process';

import test, { type ExecutionContext } from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { CONFIGURATION_KEY } from '../../ts/model/kube-controllers-configuration.ts';
import { hostEndpointKey, type HostEndpoint } from '../../ts/model/host-endpoint.ts';
import { listHostEndpoints, newDocument, readConfiguration } from '../../ts/controllers/auto-host-endpoints-resources.ts';
import { runClusterCtlMain } from '../../ts/cli/cluster-commands.ts';
import { openKubeClient } from '../../ts/k8s/client.ts';
import { KubeStore } from '../../ts/store/kubernetes/store.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { CONTROLLER_DATASTORE_RULES, CONTROLLER_RULES, controllersIdentity, startControllers } from '../controllers/fixtures.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { NETPLUGCTL } from '../helpers/ipam.ts';
import { createNode as createNodeFor, installCrds, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

const GROUP = 'crd.projectnet.org';
const shared = sharedTeardowns(test);
let kube: Kube;
let custom: k8s.CustomObjectsApi;

test.before(async () => {
  kube = await startKube(shared);
  await installCrds(kube);
  custom = kube.custom;
});

/** The built netplugctl (dist/bin): the commands as the README gives them. */
function migrateBuilt(...args: string[]): { code: number | null; out: string; err: string } {
  const run = spawnSync(NETPLUGCTL, ['migrate', 'auto-host-endpoints', ...args], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin' },
    timeout: 120_000,
  });
  return { code: run.status, out: run.stdout, err: run.stderr };
}

/** netplugctl migrate auto-host-endpoints `args`, as netplugctl dispatches it. */
async function migrate(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io = {
    out: (text: string) => {
      out += text;
    },
    err: (text: string) => {
      err += text;
    },
    signal: new AbortController().signal,
  };
  const code = await runClusterCtlMain(['migrate', 'auto-host-endpoints', ...args], {}, io);
  return { code, out, err };
}

const createNode = (t: ExecutionContext, name: string, labels: Record<string, string>, address: string) =>
  createNodeFor(kube, t, name, labels, { addresses: [{ type: 'InternalIP', address }] });

const nodeLabels = async (name: string) => (await kube.core.readNode({ name })).metadata?.labels ?? {};
const endpoints = async (store: Store) => new Map((await listHostEndpoints(store)).map((entry) => [entry.value.metadata.name, entry]));
const autoCreate = async (store: Store) => (await readConfiguration(store))?.value.spec.controllers?.node?.hostEndpoint?.autoCreate;

/** The state a run must not change: node labels, host endpoints and their revisions, the configuration's revision. */
async function snapshot(store: Store, nodes: string[]) {
  return JSON.stringify({
    nodes: await Promise.all(nodes.map(nodeLabels)),
    endpoints: [...(await endpoints(store))].map(([name, entry]) => [name, entry.revision]).sort(),
    configuration: (await store.get(CONFIGURATION_KEY))?.revision,
  });
}

async function migration(
  t: ExecutionContext,
  store: Store,
  datastoreFlags: string[],
  createEndpoint: (name: string, spec: HostEndpoint['spec'], labels: Record<string, string>) => Promise<void>,
  controllersEnv: Record<string, string>,
  label: string,
) {
  const [a, b] = [`mig-${label}-a`, `mig-${label}-b`];
  await createNode(t, a, { zone: 'z1', role: 'web' }, '10.1.0.1');
  await createNode(t, b, { env: 'staging' }, '10.1.0.2');
  await createEndpoint(`${a}-all`, { node: a, interfaceName: '*', expectedIPs: ['10.1.0.1'] }, { env: 'dev', zone: 'z1', role: 'db' });
  await createEndpoint(`${b}-all`, { node: b, interfaceName: '*' }, { env: 'prod' });
  await createEndpoint(`${a}-eth0`, { node: a, interfaceName: 'eth0' }, { env: 'dev' });
  const flags = ['--kubeconfig', kube.server.admin.kubeconfig, ...datastoreFlags];

  // A conflict: every one listed, nothing changed.
  const before = await snapshot(store, [a, b]);
  const refused = await migrate(...flags);
  t.is(refused.code, 1, refused.err);
  t.regex(refused.out, new RegExp(`conflict: node ${a} has label role="web", host endpoint ${a}-all has role="db"`));
  t.regex(refused.out, new RegExp(`conflict: node ${b} has label env="staging", host endpoint ${b}-all has env="prod"`));
  t.regex(
    refused.err,
    /^netplugctl migrate auto-host-endpoints: 2 label conflict\(s\) .*nothing was changed.*--overwrite to give the nodes the host endpoints. values\n$/,
  );
  t.is(await snapshot(store, [a, b]), before, 'nothing changed');

  // --overwrite, with no controllers: steps 1 and 2 done, step 3 times out, the old ones stay.
  const timedOut = await migrate(...flags, '--overwrite', '--timeout', '2s');
  t.is(timedOut.code, 1, timedOut.out);
  t.regex(timedOut.err, new RegExp(`timed out after 2 s waiting for ${a}-auto-hep, ${b}-auto-hep: is netplug-kube-controllers running`));
  t.regex(timedOut.out, new RegExp(`label node ${a}: env=dev \\(from host endpoint ${a}-all\\), role=db`));
  t.deepEqual(await nodeLabels(a), { zone: 'z1', env: 'dev', role: 'db' });
  t.deepEqual(await nodeLabels(b), { env: 'prod' }, "--overwrite: the nodes take the host endpoints' values");
  t.is(await autoCreate(store), 'Enabled');
  t.true((await endpoints(store)).has(`${a}-all`) && (await endpoints(store)).has(`${b}-all`), 'the old host endpoints are left in place');

  const controllers = await startControllers(t, { ...controllersEnv, ENABLED_CONTROLLERS: 'node' });

  // A dry run changes nothing (the controllers may meanwhile add the automatic ones: compare the old).
  const dry = await migrate(...flags, '--dry-run');
  t.is(dry.code, 0, dry.err);
  t.regex(dry.out, /^dry run: nothing is changed\n/);
  t.regex(dry.out, new RegExp(`would delete host endpoint ${a}-all \\(node ${a}`));
  t.true((await endpoints(store)).has(`${a}-all`));

  const done = await migrate(...flags);
  t.is(done.code, 0, done.err);
  t.regex(done.out, /step 1\/4: .*\n {2}nothing to do: their nodes have their labels\n/);
  t.regex(done.out, /step 2\/4: .*\n {2}nothing to do: autoCreate is Enabled\n/);
  t.regex(done.out, new RegExp(`deleted host endpoint ${a}-all \\(node ${a}, uid [0-9a-f-]{36}\\)`));
  t.regex(done.out, new RegExp(`deleted host endpoint ${b}-all \\(node ${b}, uid [0-9a-f-]{36}\\)`));
  const after = await endpoints(store);
  t.deepEqual([...after.keys()].sort(), [`${a}-auto-hep`, `${a}-eth0`, `${b}-auto-hep`], 'the interface host endpoint stays');
  t.deepEqual(after.get(`${a}-auto-hep`)?.value.metadata.labels, {
    env: 'dev',
    'projectnet.org/created-by': 'netplug-kube-controllers',
    role: 'db',
    zone: 'z1',
  });
  t.deepEqual(after.get(`${b}-auto-hep`)?.value.spec, {
    node: b,
    interfaceName: '*',
    expectedIPs: ['10.1.0.2'],
    profiles: ['projectnet-default-allow'],
  });

  // Idempotent: nothing to do, nothing changed (the built netplugctl).
  const settled = await snapshot(store, [a, b]);
  const again = migrateBuilt(...flags);
  t.is(again.code, 0, again.err);
  t.is((again.out.match(/nothing to (do|wait for)/g) ?? []).length, 5, again.out);
  t.regex(again.out, /\nnothing to do: every node has its automatic host endpoint and no all-interfaces host endpoint is left\n$/);
  t.is(await snapshot(store, [a, b]), settled);

  // A host endpoint whose node does not exist cannot be migrated: refused, nothing changed.
  await createEndpoint('ghost-all', { node: 'no-such-node', interfaceName: '*' }, { env: 'dev' });
  const ghost = await migrate(...flags);
  t.is(ghost.code, 1);
  t.regex(ghost.out, /problem: host endpoint ghost-all names node no-such-node, which does not exist/);
  t.true((await endpoints(store)).has('ghost-all'));
  t.is(await controllers.stop(), 0);
}

test.serial('Kubernetes datastore: migrate auto-host-endpoints, with a conflict, a timeout, a dry run and a second run', async (t) => {
  const store = new KubeStore(await openKubeClient({ kubeconfig: kube.server.admin.kubeconfig }));
  t.teardown(() => store.close());
  t.teardown(() => deleteAll(store));
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-migrate-kdd', [
    ...CONTROLLER_RULES,
    ...CONTROLLER_DATASTORE_RULES,
  ]);
  // As kubectl create -f would: a native object, no datastore key annotation.
  const createEndpoint = async (name: string, spec: HostEndpoint['spec'], labels: Record<string, string>) => {
    await custom.createClusterCustomObject({
      group: GROUP,
      version: 'v1',
      plural: 'hostendpoints',
      body: { apiVersion: `${GROUP}/v1`, kind: 'HostEndpoint', metadata: { name, labels }, spec },
    });
  };
  await migration(t, store, [], createEndpoint, { DATASTORE_TYPE: 'kubernetes', KUBECONFIG: identity.kubeconfig }, 'kdd');
});

test.serial('etcd datastore: migrate auto-host-endpoints, with a conflict, a timeout, a dry run and a second run', async (t) => {
  const etcd = await startEtcd(t);
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-migrate-etcd', CONTROLLER_RULES);
  const createEndpoint = async (name: string, spec: HostEndpoint['spec'], labels: Record<string, string>) => {
    if (!(await store.commit([{ key: hostEndpointKey(name), create: newDocument('HostEndpoint', name, labels, spec) }])))
      throw new Error(`${name} exists`);
  };
  await migration(
    t,
    store,
    ['--datastore-type', 'etcdv3', '--etcd-endpoints', etcd.endpoints],
    createEndpoint,
    { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: etcd.endpoints, KUBECONFIG: identity.kubeconfig },
    'etcd',
  );
});

test('etcd datastore: a broken host endpoint document is named (kind, name, key, field); nothing is changed', async (t) => {
  const etcd = await startEtcd(t);
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  const broken = {
    ...newDocument('HostEndpoint', 'broken', { env: 'dev' }, { node: 'n', interfaceName: '*' }),
    spec: { expectedIPs: 'x' },
  };
  t.true(await store.commit([{ key: hostEndpointKey('broken'), create: broken }]));
  const run = await migrate('--kubeconfig', kube.server.admin.kubeconfig, '--datastore-type', 'etcdv3', '--etcd-endpoints', etcd.endpoints);
  t.is(run.code, 1);
  t.is(
    run.err,
    `netplugctl migrate auto-host-endpoints: the datastore's HostEndpoint "broken" (key ${hostEndpointKey('broken')}) is broken: field "spec.expectedIPs" must be an array, got "x"; repair or remove it\n`,
  );
  t.is(run.out, '');
  t.is(await store.get(CONFIGURATION_KEY), undefined);
});

test('usage: --help, a bad --timeout, an unknown flag', async (t) => {
  const help = await migrate('--help');
  t.is(help.code, 0);
  t.regex(help.out, /^usage: netplugctl migrate auto-host-endpoints /);
  const timeout = await migrate('--timeout', 'soon');
  t.is(timeout.code, 2);
  t.is(timeout.err, 'netplugctl migrate auto-host-endpoints: --timeout "soon" must be a duration such as 90s or 5m\n');
  const unknown = await migrate('--force');
  t.is(unknown.code, 2);
  t.regex(unknown.err, /unknown flag '--force'/);
});

async function deleteAll(store: Store) {
  for (const entry of await listHostEndpoints(store)) await store.commit([{ key: entry.key, remove: true, revision: entry.revision }]);
  const configuration = await store.get(CONFIGURATION_KEY);
  if (configuration) await store.commit([{ key: CONFIGURATION_KEY, remove: true, revision: configuration.revision }]);
}
