// `npm run build:chart` makes a chart repository any static HTTP server can serve: here a
// node:http server of its directory on 127.0.0.1. helm adds it, finds the release's chart in it,
// installs it into a real kube-apiserver (no kubelet: the objects are checked, not run) and
// uninstalls it again.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, normalize, resolve } from 'node:path';

import * as k8s from '@kubernetes/client-node';
import test from 'ava';

import { CHART_VERSION, CRD_SOURCES } from '../../scripts/lib/chart-files.ts';
import { RELEASE_IMAGE } from '../../ts/render/release.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { ROOT, tempDir } from '../helpers/cni.ts';
import { startKube } from '../helpers/kube.ts';
import { isolatedHelm } from './helm.ts';

const NAMESPACE = 'netplug-operator';

/** A static file server of `dir` on 127.0.0.1 (a port of its own), closed after the test. */
async function serveDirectory(t: Parameters<typeof tempDir>[0], dir: string): Promise<string> {
  const server: Server = createServer((request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url ?? '/', 'http://x').pathname));
    const file = join(dir, path);
    if (request.method !== 'GET' || !existsSync(file) || path.endsWith('/')) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': file.endsWith('.yaml') ? 'application/x-yaml' : 'application/gzip' }).end(readFileSync(file));
  });
  await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
  t.teardown(() => new Promise<void>((closed) => server.close(() => closed())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The names of the CRDs of deploy/ the chart carries. */
const crdNames = () =>
  CRD_SOURCES.filter((dir) => existsSync(join(ROOT, dir))).flatMap((dir) =>
    readdirSync(join(ROOT, dir))
      .filter((name) => name.endsWith('.yaml'))
      .map((name) => k8s.loadYaml<k8s.V1CustomResourceDefinition>(readFileSync(join(ROOT, dir, name), 'utf8')).metadata!.name!),
  );

test('npm run build:chart makes a repository that helm adds, searches and installs from a static HTTP server, and helm uninstalls', async (t) => {
  t.timeout(10 * 60_000, 'the first run may build helm');
  const out = tempDir(t, 'charts');
  const printed = execFileSync(process.execPath, [join(ROOT, 'scripts/build-chart.ts'), '--out', out], { cwd: ROOT, encoding: 'utf8' })
    .trim()
    .split('\n');
  const archive = resolve(ROOT, printed.at(-1)!);
  t.is(archive, join(out, `netplug-operator-${CHART_VERSION}.tgz`));
  const index = k8s.loadYaml<any>(readFileSync(join(out, 'index.yaml'), 'utf8'));
  t.like(index.entries['netplug-operator'][0], {
    version: CHART_VERSION,
    appVersion: NETPLUG_VERSION,
    urls: [`netplug-operator-${CHART_VERSION}.tgz`],
  });

  const url = await serveDirectory(t, out);
  const kube = await startKube(t);
  const helm = isolatedHelm(t, kube.server.admin.kubeconfig);
  await helm('repo', 'add', 'netplug', url);
  const found = JSON.parse(await helm('search', 'repo', 'netplug/netplug-operator', '--output', 'json'));
  t.deepEqual(
    found.map((chart: any) => [chart.name, chart.version, chart.app_version]),
    [['netplug/netplug-operator', CHART_VERSION, NETPLUG_VERSION]],
  );

  await helm('install', 'netplug', 'netplug/netplug-operator', '-n', NAMESPACE, '--create-namespace', '--version', CHART_VERSION);
  const [status] = JSON.parse(await helm('list', '-n', NAMESPACE, '--output', 'json'));
  t.like(status, {
    name: 'netplug',
    namespace: NAMESPACE,
    status: 'deployed',
    chart: `netplug-operator-${CHART_VERSION}`,
    app_version: NETPLUG_VERSION,
  });

  const config = kube.config;
  const apps = config.makeApiClient(k8s.AppsV1Api);
  const extensions = config.makeApiClient(k8s.ApiextensionsV1Api);
  const custom = config.makeApiClient(k8s.CustomObjectsApi);
  await kube.core.readNamespace({ name: NAMESPACE }); // made by --create-namespace
  const deployment = await apps.readNamespacedDeployment({ name: 'netplug-operator', namespace: NAMESPACE });
  const container = deployment.spec?.template.spec?.containers[0];
  t.is(container?.image, RELEASE_IMAGE);
  t.is(container?.env?.find((env) => env.name === 'NETPLUG_IMAGE')?.value, RELEASE_IMAGE);
  t.is(deployment.spec?.template.spec?.serviceAccountName, 'netplug-operator');
  await kube.core.readNamespacedServiceAccount({ name: 'netplug-operator', namespace: NAMESPACE });
  const role = await kube.rbac.readClusterRole({ name: 'netplug-operator' });
  t.true(role.rules?.some((rule) => rule.resources?.includes('installations')));
  const binding = await kube.rbac.readClusterRoleBinding({ name: 'netplug-operator' });
  t.deepEqual(
    binding.subjects?.map(({ kind, name, namespace }) => ({ kind, name, namespace })),
    [{ kind: 'ServiceAccount', name: 'netplug-operator', namespace: NAMESPACE }],
  );
  const crds = (await extensions.listCustomResourceDefinition()).items.map((crd) => crd.metadata?.name).sort();
  t.deepEqual(crds, crdNames().sort());
  const installation: any = await custom.getClusterCustomObject({
    group: 'operator.projectnet.org',
    version: 'v1',
    plural: 'installations',
    name: 'default',
  });
  t.deepEqual(installation.spec, {});

  await helm('uninstall', 'netplug', '-n', NAMESPACE);
  const gone = (read: () => Promise<unknown>) =>
    read().then(
      () => false,
      (error) => error.code === 404,
    );
  t.true(await gone(() => apps.readNamespacedDeployment({ name: 'netplug-operator', namespace: NAMESPACE })));
  t.true(await gone(() => kube.core.readNamespacedServiceAccount({ name: 'netplug-operator', namespace: NAMESPACE })));
  t.true(await gone(() => kube.rbac.readClusterRole({ name: 'netplug-operator' })));
  t.true(await gone(() => kube.rbac.readClusterRoleBinding({ name: 'netplug-operator' })));
  t.true(
    await gone(() =>
      custom.getClusterCustomObject({ group: 'operator.projectnet.org', version: 'v1', plural: 'installations', name: 'default' }),
    ),
  );
  // helm keeps the CRDs of crds/ (deleting one deletes its resources): NOTES.txt says so.
  t.deepEqual((await extensions.listCustomResourceDefinition()).items.map((crd) => crd.metadata?.name).sort(), crds);
  t.deepEqual(JSON.parse(await helm('list', '-n', NAMESPACE, '--output', 'json')), []);
});
