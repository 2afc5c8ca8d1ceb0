// Fixtures of the owner-references tests: a real kube-apiserver with netplug's CRDs, IP pools as
// owners, objects owned by them, and kube-controller-manager running only its garbage collector
// (built by scripts/kube-binaries.sh), so that what it collects is what a cluster would collect.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import * as k8s from '@kubernetes/client-node';

import { runOwnerReferencesCommand } from '../../ts/migrate/owner-references-command.ts';
import { RECORD_NAME, RECORD_NAMESPACE } from '../../ts/migrate/owner-references.ts';
import { ROOT } from '../helpers/cni.ts';
import { installCrds, startKube, type Kube } from '../helpers/kube.ts';
import type { Teardowns } from '../helpers/shared.ts';

export const POOL_API_VERSION = 'crd.projectnet.org/v1';

export interface Fixture {
  kube: Kube;
  config: k8s.KubeConfig;
  objects: k8s.KubernetesObjectApi;
  custom: k8s.CustomObjectsApi;
  dir: string;
}

export async function startFixture(shared: Teardowns, dir: string): Promise<Fixture> {
  const kube = await startKube(shared);
  await installCrds(kube);
  const config = kube.config;
  return {
    kube,
    config,
    objects: k8s.KubernetesObjectApi.makeApiClient(config),
    custom: config.makeApiClient(k8s.CustomObjectsApi),
    dir,
  };
}

/** An IPPool (cluster-scoped, crd.projectnet.org/v1) as netplug writes it; its UID. */
export async function createPool(fixture: Fixture, name: string, cidr = '10.77.0.0/16'): Promise<string> {
  const created = (await fixture.custom.createClusterCustomObject({
    group: 'crd.projectnet.org',
    version: 'v1',
    plural: 'ippools',
    body: {
      apiVersion: POOL_API_VERSION,
      kind: 'IPPool',
      metadata: { name },
      spec: { kind: 'IPPool', apiVersion: 'projectnet.org/v3', metadata: { name }, spec: { cidr, blockSize: 26 } },
    },
  })) as { metadata: { uid: string } };
  return created.metadata.uid;
}

/** Deletes the pool (no finalizers: gone at once). */
export async function deletePool(fixture: Fixture, name: string): Promise<void> {
  await fixture.custom.deleteClusterCustomObject({ group: 'crd.projectnet.org', version: 'v1', plural: 'ippools', name }).catch(notFound);
}

/** Deletes and creates the pool again: the same name, a new UID (what an import or a restore does). */
export async function recreatePool(fixture: Fixture, name: string): Promise<string> {
  await deletePool(fixture, name);
  return createPool(fixture, name);
}

/** A test's pool, deleted after it, and the record with it. */
export async function pool(fixture: Fixture, teardowns: Teardowns, name: string): Promise<string> {
  teardowns.teardown(async () => {
    await deletePool(fixture, name);
    await removeRecord(fixture);
  });
  return createPool(fixture, name);
}

/** The client's typed objects as plain JSON. */
export const plain = (value: unknown) => JSON.parse(JSON.stringify(value));

/** `kind/name/uid` of each owner reference of an object. */
export const ownerUids = (object: k8s.V1ConfigMap | k8s.CoreV1Event | undefined) =>
  (object?.metadata?.ownerReferences ?? []).map((r) => `${r.kind}/${r.name}/${r.uid}`);

export const poolOwner = (name: string, uid: string, controller?: boolean): k8s.V1OwnerReference => ({
  apiVersion: POOL_API_VERSION,
  kind: 'IPPool',
  name,
  uid,
  ...(controller === undefined ? {} : { controller }),
});

let namespaces = 0;

/** A namespace of the test's own, deleted after it. */
export async function makeNamespace(fixture: Fixture, teardowns: Teardowns): Promise<string> {
  const name = `owners-${process.pid}-${namespaces++}`;
  await fixture.kube.core.createNamespace({ body: { metadata: { name } } });
  // Its objects by name first: without kube-controller-manager's namespace controller, deleting
  // a namespace removes nothing in it.
  teardowns.teardown(async () => {
    await fixture.kube.core.deleteCollectionNamespacedConfigMap({ namespace: name });
    await fixture.kube.core.deleteNamespace({ name }).catch(notFound);
  });
  return name;
}

export async function createConfigMap(
  fixture: Fixture,
  namespace: string,
  name: string,
  owners: k8s.V1OwnerReference[],
): Promise<k8s.V1ConfigMap> {
  return fixture.kube.core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name, ownerReferences: owners }, data: { kept: 'yes' } },
  });
}

export async function readConfigMap(fixture: Fixture, namespace: string, name: string): Promise<k8s.V1ConfigMap | undefined> {
  return fixture.kube.core.readNamespacedConfigMap({ namespace, name }).catch((err) => notFound(err) as undefined);
}

/** The record's entries (key → parsed value), or undefined when there is no record. */
export async function readRecordData(
  fixture: Fixture,
): Promise<Record<string, { state: string; message?: string; owner: { uid: string } }> | undefined> {
  const configMap = await readConfigMap(fixture, RECORD_NAMESPACE, RECORD_NAME);
  if (!configMap) return undefined;
  return Object.fromEntries(Object.entries(configMap.data ?? {}).map(([key, value]) => [key, JSON.parse(value)]));
}

export async function removeRecord(fixture: Fixture): Promise<void> {
  await fixture.kube.core.deleteNamespacedConfigMap({ namespace: RECORD_NAMESPACE, name: RECORD_NAME }).catch(notFound);
}

/** Runs `netplugctl migrate owner-references <args>` in process, as the administrator. */
export async function ctl(fixture: Fixture | undefined, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const env = fixture ? { KUBECONFIG: fixture.kube.server.admin.kubeconfig } : {};
  const code = await runOwnerReferencesCommand(args, env, {
    out: (text) => (out += text),
    err: (text) => (err += text),
    signal: new AbortController().signal,
  });
  return { code, out, err };
}

/** The built executable (npm test's pretest builds it). */
export const NETPLUGCTL = join(ROOT, 'dist/bin/netplugctl');

/** Runs `netplugctl <args>` as a user would, with only PATH and `env` in its environment. */
export function netplugctl(env: Record<string, string>, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(NETPLUGCTL, args, { env: { PATH: '/usr/bin:/bin', ...env }, timeout: 120_000 }, (error, out, err) =>
      resolve({
        code: error ? (typeof error.code === 'number' ? error.code : -1) : 0,
        out,
        err: typeof error?.code === 'number' || !error ? err : `${error.message}\n${err}`,
      }),
    );
  });
}

export function notFound(err: unknown): undefined {
  if ((err as { code?: number }).code === 404) return undefined;
  throw err;
}

/**
 * kube-controller-manager with the garbage collector alone, started after netplug's CRDs are
 * served (it finds resources by discovery, again only every 30 s), stopped by the teardown.
 */
export async function startGarbageCollector(fixture: Fixture, shared: Teardowns): Promise<{ log: () => string }> {
  const binaries = execFileSync('sh', [join(ROOT, 'scripts/kube-binaries.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  const logFile = join(fixture.dir, 'kube-controller-manager.log');
  const fd = openSync(logFile, 'a');
  const child = spawn(
    join(binaries, 'kube-controller-manager'),
    [
      `--kubeconfig=${fixture.kube.server.admin.kubeconfig}`,
      '--controllers=garbagecollector',
      '--leader-elect=false',
      '--use-service-account-credentials=false',
      // No serving port: nothing to clash with other clusters on this machine.
      '--secure-port=0',
      '--profiling=false',
      `--flex-volume-plugin-dir=${join(fixture.dir, 'volume-plugins')}`,
      '--v=2',
    ],
    { stdio: ['ignore', fd, fd] },
  );
  closeSync(fd);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  shared.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  const log = () => readFileSync(logFile, 'utf8').split('\n').slice(-40).join('\n');
  return { log };
}
