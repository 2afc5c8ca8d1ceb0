// netplug-operator against a real kube-apiserver (no controller manager, no kubelet: DaemonSets
// and Deployments get no status, namespaces stay Terminating until finalized): netplug's and the
// operator's CRDs, the operator running in process as an identity bound to exactly
// OPERATOR_RULES and, in its namespace, the Role of its Lease (ts/render/operator.ts), and an
// administrator's clients for fixtures. What the operator waits for without an event (a pool
// draining, pods stopping) it looks at again after short injected delays.
import { readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';

import * as k8s from '@kubernetes/client-node';

import type { Identity } from '../../scripts/lib/kube-server.ts';
import { runOperatorMain } from '../../ts/operator/main.ts';
import { OPERATOR, OPERATOR_NAMESPACE, OPERATOR_RULES, renderOperator } from '../../ts/render/operator.ts';
import { ROOT } from '../helpers/cni.ts';
import { freePort } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { installCrds, type Kube, startKube } from '../helpers/kube.ts';
import type { Teardowns } from '../helpers/shared.ts';

export const IMAGE = 'localhost/netplug:operator-test';
const GROUP = 'operator.projectnet.org';

export interface Cluster {
  kube: Kube;
  apps: k8s.AppsV1Api;
  custom: k8s.CustomObjectsApi;
  extensions: k8s.ApiextensionsV1Api;
  /** The operator's log lines so far. */
  log: string[];
  /** Where the operator serves /livez, /readyz and /metrics. */
  health: string;
}

export async function installOperatorCrds(extensions: k8s.ApiextensionsV1Api): Promise<void> {
  const dir = join(ROOT, 'deploy/operator-crds');
  const crds = readdirSync(dir).map((file) => k8s.loadYaml<k8s.V1CustomResourceDefinition>(readFileSync(join(dir, file), 'utf8')));
  await Promise.all(crds.map((body) => extensions.createCustomResourceDefinition({ body })));
  for (const crd of crds) await established(extensions, crd.metadata?.name as string);
}

export async function established(extensions: k8s.ApiextensionsV1Api, name: string): Promise<void> {
  await eventually(`CRD ${name} established`, async () =>
    Boolean(
      (await extensions.readCustomResourceDefinition({ name })).status?.conditions?.some(
        (c) => c.type === 'Established' && c.status === 'True',
      ),
    ),
  );
}

/**
 * The operator's identity: `user` bound to OPERATOR_RULES cluster-wide, and in the operator's
 * namespace (made here) to the shipped Role of its Lease.
 */
export async function operatorIdentity(kube: Kube, user: string): Promise<Identity> {
  const identity = await kube.identityWith(user, OPERATOR_RULES);
  const namespace = OPERATOR_NAMESPACE;
  await kube.core.createNamespace({ body: { metadata: { name: namespace } } }).catch((err: { code?: number }) => {
    if (err.code !== 409) throw err;
  });
  const role = renderOperator(IMAGE).find((object) => object.kind === 'Role') as unknown as k8s.V1Role;
  await kube.rbac.createNamespacedRole({ namespace, body: { metadata: { name: user, namespace }, rules: role.rules ?? [] } });
  await kube.rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: user, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: user },
      subjects: [{ kind: 'User', name: user }],
    },
  });
  return identity;
}

/** Short waits for what no event announces: a test sees the outcome without waiting the shipped 10 s. */
export const TEST_WAITS = { notAvailableMs: 500, cleanUpMs: 250, conflictMs: 200 };

/** The operator's environment in these tests, as its manifest gives it (its namespace), with a health port of its own. */
export const operatorEnv = async (identity: Identity): Promise<NodeJS.ProcessEnv> => ({
  KUBECONFIG: identity.kubeconfig,
  NETPLUG_IMAGE: IMAGE,
  OPERATOR_NAMESPACE,
  NETPLUG_OPERATOR_HEALTH_ADDR: `127.0.0.1:${await freePort()}`,
});

/** A cluster with the CRDs and the operator running until the file's teardown. */
export async function startCluster(shared: Teardowns): Promise<Cluster> {
  const kube = await startKube(shared);
  await installCrds(kube);
  const config = kube.config;
  const extensions = config.makeApiClient(k8s.ApiextensionsV1Api);
  await installOperatorCrds(extensions);
  const identity = await operatorIdentity(kube, OPERATOR);
  const log: string[] = [];
  const stop = new AbortController();
  const env = await operatorEnv(identity);
  const exit = runOperatorMain([], env, stop.signal, {
    writeLog: (line) => log.push(line.trimEnd()),
    waits: TEST_WAITS,
    // Every reconcile here comes from an event: a test can tell which event brought one.
    resyncMs: 3_600_000,
  });
  shared.teardown(async () => {
    stop.abort();
    await exit;
  });
  return {
    kube,
    apps: config.makeApiClient(k8s.AppsV1Api),
    custom: config.makeApiClient(k8s.CustomObjectsApi),
    extensions,
    log,
    health: `http://${env['NETPLUG_OPERATOR_HEALTH_ADDR']}`,
  };
}

/** An HTTP answer's status code and text (0 and the error when there was none). */
export async function httpStatus(url: string): Promise<{ code: number; text: string }> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    return { code: response.status, text: await response.text() };
  } catch (err) {
    return { code: 0, text: (err as Error).message };
  }
}

/** A metric's value from `health`/metrics, summed over the series whose labels include `labels` (0 when absent). */
export async function metric(health: string, name: string, labels = ''): Promise<number> {
  const { text } = await httpStatus(`${health}/metrics`);
  const lines = text.split('\n').filter((line) => line.startsWith(`${name}{`) && line.includes(labels));
  return lines.reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

/** The Installation controller's reconciles so far. */
export const reconciles = (health: string) => metric(health, 'netplug_controller_reconcile_total', 'controller="installation"');

export const installation = { group: GROUP, version: 'v1', plural: 'installations', name: 'default' };
export const statusOf = (name: string) => ({ group: GROUP, version: 'v1', plural: 'netplugstatuses', name });
export const poolRef = (name: string) => ({ group: 'crd.projectnet.org', version: 'v1', plural: 'ippools', name });

export type Condition = { type: string; status: string; reason: string; message: string; observedGeneration?: number };
export type InstallationObject = {
  metadata: { finalizers?: string[]; resourceVersion: string; generation?: number };
  spec: any;
  status?: { observedGeneration?: number; conditions?: Condition[]; computed?: any; mtu?: number; netplugVersion?: string };
};

export const condition = (object: { status?: { conditions?: Condition[] } } | undefined, type: string) =>
  object?.status?.conditions?.find((c) => c.type === type);

export async function createInstallation(cluster: Cluster, spec: object, name = 'default'): Promise<void> {
  await cluster.custom.createClusterCustomObject({
    group: GROUP,
    version: 'v1',
    plural: 'installations',
    body: { apiVersion: `${GROUP}/v1`, kind: 'Installation', metadata: { name }, spec },
  });
}

export async function readInstallation(cluster: Cluster, name = 'default'): Promise<InstallationObject | undefined> {
  try {
    return (await cluster.custom.getClusterCustomObject({ ...installation, name })) as InstallationObject;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

export async function patchInstallation(cluster: Cluster, patch: object): Promise<void> {
  await cluster.custom.patchClusterCustomObject(
    { ...installation, body: patch },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
}

/**
 * Deletes the Installation and waits for the operator's clean-up, then does what the namespace
 * controller would (finalizes netplug-system) and removes the pools the test left.
 */
export async function removeInstallation(cluster: Cluster): Promise<void> {
  await cluster.custom.deleteClusterCustomObject(installation).catch(() => undefined);
  await eventually('the Installation to be gone', async () => (await readInstallation(cluster)) === undefined);
  await finalizeSystemNamespace(cluster);
  const pools = (await cluster.custom.listClusterCustomObject({ group: 'crd.projectnet.org', version: 'v1', plural: 'ippools' })) as {
    items: { metadata: { name: string } }[];
  };
  for (const pool of pools.items) await cluster.custom.deleteClusterCustomObject(poolRef(pool.metadata.name));
}

export async function finalizeSystemNamespace(cluster: Cluster): Promise<void> {
  const namespace = await cluster.kube.core.readNamespace({ name: 'netplug-system' }).catch(() => undefined);
  if (!namespace) return;
  if (!namespace.metadata?.deletionTimestamp) await cluster.kube.core.deleteNamespace({ name: 'netplug-system' });
  await cluster.kube.core.replaceNamespaceFinalize({
    name: 'netplug-system',
    body: { metadata: { name: 'netplug-system' }, spec: { finalizers: [] } },
  });
  await eventually(
    'netplug-system to be gone',
    async () => (await cluster.kube.core.readNamespace({ name: 'netplug-system' }).catch(() => undefined)) === undefined,
  );
}

/** What `kubectl get` prints for a collection: the server's Table (columns from the CRD's printer columns). */
export function readTable(cluster: Cluster, path: string): Promise<{ columns: string[]; rows: unknown[][] }> {
  const { server } = cluster.kube;
  return new Promise((resolve, reject) => {
    const req = request(
      `${server.url}${path}`,
      {
        ca: readFileSync(server.ca),
        cert: readFileSync(server.admin.cert),
        key: readFileSync(server.admin.key),
        headers: { Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' },
      },
      (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () => {
          const table = JSON.parse(body) as { columnDefinitions: { name: string }[]; rows: { cells: unknown[] }[] };
          resolve({ columns: table.columnDefinitions.map((c) => c.name), rows: table.rows.map((r) => r.cells) });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

export const SYSTEM = 'netplug-system';
export type Pool = { metadata: { name: string; labels?: Record<string, string> }; spec: { spec: Record<string, unknown> } };

export const readConfigMap = (cluster: Cluster) => cluster.kube.core.readNamespacedConfigMap({ name: 'cni-config', namespace: SYSTEM });
export const readConflist = async (cluster: Cluster) => JSON.parse((await readConfigMap(cluster)).data?.['config'] ?? '{}');
export const readDaemonSet = (cluster: Cluster) => cluster.apps.readNamespacedDaemonSet({ name: 'netplug-node', namespace: SYSTEM });
export const readPool = async (cluster: Cluster, name: string) =>
  (await cluster.custom.getClusterCustomObject(poolRef(name)).catch(() => undefined)) as Pool | undefined;
export const readStatus = async (cluster: Cluster, name: string) =>
  (await cluster.custom.getClusterCustomObject(statusOf(name)).catch(() => undefined)) as
    | { status?: { conditions?: Condition[] } }
    | undefined;
