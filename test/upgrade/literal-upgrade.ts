// One upgrade procedure of the specification ("Versioning": helm, operator, manifest on either
// datastore), run with its literal commands under the real kubelet: v3.30.0 installed as its README
// says, a workload running and probed during the rollout, the procedure's commands in netplug's
// names, the wait for the rollout from facts (rollout status, readiness), then the checks
// and the version rule (an older netplugctl refuses to write afterwards; this one writes).
import { copyFileSync, createReadStream, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';

import type { ExecutionContext, TestFn } from 'ava';

import { CHART_VERSION } from '../../scripts/lib/chart-files.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { eventually, imageArchive, NETPLUGCTL } from '../e2e/install.ts';
import { waitAvailable } from '../e2e/operator-install.ts';
import { type Cluster, clusterPerFile, getJson } from '../helpers/cluster.ts';
import {
  helmFor,
  type InstallMethod,
  installPrevious,
  manifestWithNodePaths,
  operatorManifestWithNodePaths,
  type PreviousInstall,
  runNetplugctl,
  waitRolledOut,
} from './install-previous.ts';
import {
  checkAfterUpgrade,
  describeRollout,
  previousNetplugctl,
  snapshotAddresses,
  startRolloutProbes,
  startWorkload,
} from './workload.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const MANIFESTS = join(ROOT, 'deploy/manifests');
const SSA = ['apply', '--server-side', '--force-conflicts', '-f'];

/**
 * This release as built in dist/ (npm test's pretest): its image imported into the node, and its
 * netplugctl copied (with the addon beside it) into the cluster's directory. dist/ is rebuilt
 * whole by `npm run build`: wait for it to be there, and keep a copy for the test's duration.
 */
async function thisRelease(cluster: Cluster): Promise<{ netplugctl: string }> {
  const archive = await eventually(
    'dist/ built (npm run build, build-image)',
    async () => (existsSync(NETPLUGCTL) ? imageArchive() : undefined),
    600,
  );
  await cluster.importImage(archive);
  const dir = join(cluster.dir, 'this-release');
  mkdirSync(dir, { recursive: true });
  for (const name of readdirSync(dirname(NETPLUGCTL)).filter((name) => name === 'netplugctl' || name.endsWith('.node')))
    copyFileSync(join(dirname(NETPLUGCTL), name), join(dir, name));
  return { netplugctl: join(dir, 'netplugctl') };
}

/** The spec's steps for one method, with the commands a cluster operator types. */
type Procedure = (t: ExecutionContext, cluster: Cluster, installed: PreviousInstall) => Promise<void>;

/** Manifest install, either datastore: SSA of this release's CRDs and manifest (the install's edits made again), then watch the rollout. */
const manifestProcedure =
  (file: 'netplug.yaml' | 'netplug-etcd.yaml'): Procedure =>
  async (t, cluster, installed) => {
    const manifest = manifestWithNodePaths(cluster, join(MANIFESTS, file), installed.paths, installed.configData, `v3.31-${file}`);
    for (const path of [join(MANIFESTS, 'crds.yaml'), manifest])
      t.log(`$ kubectl ${SSA.join(' ')} ${path}\n${await cluster.kubectl(...SSA, path)}`);
    await waitRolledOut(cluster, 'kube-system');
  };

/** The operator's DaemonSet carries this release once the new operator has re-rendered it. */
async function waitOperatorRollout(cluster: Cluster): Promise<void> {
  await cluster.kubectl('-n', 'netplug-operator', 'rollout', 'status', 'deployment/netplug-operator', '--timeout=300s');
  await eventually(
    'the new operator to render netplug-node with this release',
    async () =>
      (await getJson(cluster, '-n', 'netplug-system', 'daemonset', 'netplug-node')).spec.template.spec.containers[0].image.endsWith(
        NETPLUG_VERSION,
      ),
    300,
  );
  await waitRolledOut(cluster, 'netplug-system');
  await eventually(
    'Installation default reports this release',
    async () => (await getJson(cluster, 'installation', 'default')).status?.netplugVersion === NETPLUG_VERSION,
    300,
  );
  await waitAvailable(cluster, 300);
}

/** Operator install: SSA of operator-crds.yaml, then of netplug-operator.yaml (CRDs first). */
const operatorProcedure: Procedure = async (t, cluster, installed) => {
  const operator = operatorManifestWithNodePaths(
    cluster,
    join(MANIFESTS, 'netplug-operator.yaml'),
    installed.paths,
    'v3.31-netplug-operator.yaml',
  );
  for (const path of [join(MANIFESTS, 'operator-crds.yaml'), operator])
    t.log(`$ kubectl ${SSA.join(' ')} ${path}\n${await cluster.kubectl(...SSA, path)}`);
  await waitOperatorRollout(cluster);
};

/** A static HTTP server of `dir` on 127.0.0.1 until the test ends: the project's chart repository. */
async function serveDirectory(t: ExecutionContext, dir: string): Promise<string> {
  const server = createServer((request, response) => {
    const file = join(dir, decodeURIComponent(new URL(request.url ?? '/', 'http://x').pathname));
    if (!file.startsWith(dir) || !existsSync(file)) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200);
    createReadStream(file).pipe(response);
  });
  await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
  t.teardown(() => new Promise<void>((closed) => server.close(() => closed())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Helm install: SSA of operator-crds.yaml (helm never upgrades crds/), then helm upgrade from the chart repository, version pinned. */
const helmProcedure: Procedure = async (t, cluster, installed) => {
  // The project's chart repository: both releases' packages and an index, as `npm run build:chart` makes it.
  const repository = join(cluster.dir, 'chart-repository');
  mkdirSync(repository, { recursive: true });
  const { execFileSync } = await import('node:child_process');
  execFileSync(process.execPath, [join(ROOT, 'scripts/build-chart.ts'), '--out', repository], { stdio: 'ignore' });
  copyFileSync(installed.release.chart, join(repository, `netplug-operator-${installed.release.version.slice(1)}.tgz`));
  const helm = helmFor(cluster);
  await helm('repo', 'index', repository);
  await helm('repo', 'add', 'netplug', await serveDirectory(t, repository));
  const crds = join(MANIFESTS, 'operator-crds.yaml');
  t.log(`$ kubectl ${SSA.join(' ')} ${crds}\n${await cluster.kubectl(...SSA, crds)}`);
  const { name, namespace } = installed.helmRelease ?? { name: 'netplug', namespace: 'netplug-operator' };
  const upgrade = ['upgrade', name, 'netplug/netplug-operator', '-n', namespace, '--version', CHART_VERSION];
  t.log(`$ helm ${upgrade.join(' ')}\n${await helm(...upgrade)}`);
  await waitOperatorRollout(cluster);
};

const PROCEDURES: Record<Exclude<InstallMethod, 'host-local'>, Procedure> = {
  'manifest-kdd': manifestProcedure('netplug.yaml'),
  'manifest-etcd': manifestProcedure('netplug-etcd.yaml'),
  operator: operatorProcedure,
  helm: helmProcedure,
};

/** Where a field of the live netplug-node DaemonSet came from, for the stale-field trap. */
async function legacyFields(cluster: Cluster, namespace: string) {
  const daemonSet = await getJson(cluster, '-n', namespace, 'daemonset', 'netplug-node', '--show-managed-fields');
  const pod = daemonSet.spec.template.spec;
  return {
    env: pod.containers[0].env.some((variable: any) => variable.name === 'NETPLUG_LEGACY_STATUS_FILE'),
    initContainers: (pod.initContainers ?? []).map((container: any) => `${container.name} ${container.image}`),
    managers: [...new Set(daemonSet.metadata.managedFields.map((entry: any) => entry.manager))].sort(),
  };
}

export function literalUpgrade(test: TestFn, method: Exclude<InstallMethod, 'host-local'>): void {
  const cluster = clusterPerFile(test, { systemPlugins: false });
  let installed: PreviousInstall | undefined;
  let upgraded = false;
  let netplugctl = NETPLUGCTL;
  const file = { started: Date.now() };

  test.serial(
    `${method}: v3.30.0 installed as its README says, a workload running; the literal procedure upgrades it to ${NETPLUG_VERSION}`,
    async (t) => {
      const c = cluster();
      // This release first: the node has its image before anything else starts.
      ({ netplugctl } = await thisRelease(c));
      const started = Date.now();
      installed = await installPrevious(c, method);
      t.log(`v3.30.0 installed by ${method} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      const before = await legacyFields(c, installed.namespace);
      t.true(before.env, 'v3.30.0 has the legacy env var');
      t.regex(await runNetplugctl(c, installed, installed.release.netplugctl, 'version'), /Cluster Version:\s+v3\.30\.0\n/);
      await startWorkload(c);
      const addresses = await snapshotAddresses(c);
      const probes = await startRolloutProbes(c);
      const upgradeStarted = Date.now();
      await PROCEDURES[method](t, c, installed);
      const seconds = (Date.now() - upgradeStarted) / 1000;
      const stats = await probes.stop();
      t.log(`${method}: ${describeRollout(seconds, stats)}`);
      await checkAfterUpgrade(t, c, installed, addresses, stats, netplugctl);
      upgraded = true;

      const after = await legacyFields(c, installed.namespace);
      if (method.startsWith('manifest')) {
        // The stale-field trap (reference §C.0): what v3.30.0's `kubectl create` wrote and 3.31 drops
        // stays, as kubectl-create still owns it; server-side apply removes only what its own manager
        // owned. Known consequence of the literal procedure; `netplugctl upgrade` handles it.
        t.true(after.env, 'NETPLUG_LEGACY_STATUS_FILE survives the literal server-side apply');
        t.deepEqual(after.initContainers, ['upgrade-ipam localhost/netplug:v3.30.0'], 'so does v3.30.0 upgrade-ipam, with its image');
        t.true(after.managers.includes('kubectl-create'));
        t.log(
          `stale fields after the literal SSA: env NETPLUG_LEGACY_STATUS_FILE, init containers ${after.initContainers.join(', ')}; managers ${after.managers.join(', ')}`,
        );
      } else {
        // The operator owns what it renders: its own server-side apply drops the field.
        t.false(after.env, 'the new operator removed NETPLUG_LEGACY_STATUS_FILE');
      }
    },
  );

  test.serial('after the upgrade the v3.30.0 netplugctl refuses to write, naming the versions; this one writes', async (t) => {
    const c = cluster();
    if (!installed || !upgraded) return t.fail('not upgraded (see the test before)');
    const pool = ['pool', 'create', 'upgrade-check', '--cidr', '10.99.0.0/24'];
    const old = await previousNetplugctl(c, installed, ...pool);
    t.is(old.code, 1, old.stderr);
    t.regex(old.stderr, new RegExp(`netplugctl v3\\.30\\.0 is older than the cluster's netplug ${NETPLUG_VERSION.replaceAll('.', '\\.')}`));
    t.is(old.stderr.trim().split('\n').length, 1, 'one line');
    await runNetplugctl(c, installed, netplugctl, ...pool);
    t.regex(await runNetplugctl(c, installed, netplugctl, 'pool', 'get', 'upgrade-check'), /10\.99\.0\.0\/24/);
    await runNetplugctl(c, installed, netplugctl, 'pool', 'delete', 'upgrade-check');
    t.log(`${method}: this file took ${((Date.now() - file.started) / 1000).toFixed(0)} s`);
  });
}
