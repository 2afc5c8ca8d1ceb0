// netplug-operator against a real kube-apiserver (no controller manager, no kubelet: DaemonSets
// and Deployments get no status, namespaces stay Terminating until finalized): netplug's and the
// operator's CRDs, the operator running in process as an identity bound to exactly
// OPERATOR_RULES (ts/render/operator.ts), and an administrator's clients for fixtures.
import { readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';

import * as k8s from '@kubernetes/client-node';

import { lineLog } from '../../ts/operator/log.ts';
import { runOperator } from '../../ts/operator/main.ts';
import { OPERATOR_RULES } from '../../ts/render/operator.ts';
import { ROOT } from '../helpers/cni.ts';
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

/** A cluster with the CRDs and the operator running until the file's teardown. */
export async function startCluster(shared: Teardowns): Promise<Cluster> {
  const kube = await startKube(shared);
  await installCrds(kube);
  const config = new k8s.KubeConfig();
  config.loadFromFile(kube.server.admin.kubeconfig);
  const extensions = config.makeApiClient(k8s.ApiextensionsV1Api);
  await installOperatorCrds(extensions);
  const identity = await kube.identityWith('netplug-operator', OPERATOR_RULES);
  const log: string[] = [];
  const stop = new AbortController();
  const exit = runOperator(
    [],
    { KUBECONFIG: identity.kubeconfig, NETPLUG_IMAGE: IMAGE },
    stop.signal,
    lineLog((line) => log.push(line.trimEnd())),
  );
  shared.teardown(async () => {
    stop.abort();
    await exit;
  });
  return { kube, apps: config.makeApiClient(k8s.AppsV1Api), custom: config.makeApiClient(k8s.CustomObjectsApi), extensions, log };
}

export async function eventually(what: string, condition: () => boolean | Promise<boolean>, seconds = 60): Promise<void> {
  let last: unknown;
  for (let waited = 0; waited < seconds * 10; waited++) {
    try {
      if (await condition()) return;
    } catch (err) {
      last = err;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
}

export const installation = { group: GROUP, version: 'v1', plural: 'installations', name: 'default' };
export const statusOf = (name: string) => ({ group: GROUP, version: 'v1', plural: 'netplugstatuses', name });
export const poolRef = (name: string) => ({ group: 'crd.projectnet.org', version: 'v1', plural: 'ippools', name });

export type Condition = { type: string; status: string; reason: string; message: string };
export type InstallationObject = {
  metadata: { finalizers?: string[]; resourceVersion: string };
  spec: any;
  status?: { conditions?: Condition[]; computed?: any; mtu?: number; netplugVersion?: string };
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
