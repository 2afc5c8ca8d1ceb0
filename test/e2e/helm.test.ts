// docs/install.md run as written under the real kubelet, one install method after the other on
// one node (each removed as the page says before the next): the image import, the manifest on the
// Kubernetes datastore, the manifest on etcd, the operator, and helm with 20 pods from its pool.
// The commands run in the docs shell (test/docs/docs-shell.ts); the files they read differ from
// the repository's only where the test node differs from a real one (manifestFor, the chart's
// node values below).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { dumpYaml, loadYaml } from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';

import { CHART_PATH, helmBinary } from '../chart/helm.ts';
import { CHART_VERSION } from '../../scripts/lib/chart-files.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { docsBlocks } from '../docs/command-blocks.ts';
import { type DocsShell, docsShell, runCommands } from '../docs/docs-shell.ts';
import { BUSYBOX_IMAGE, CLUSTER_CIDR, type Cluster, clusterPerFile, getJson } from '../helpers/cluster.ts';
import { nftBinary } from '../helpers/kernel.ts';
import { eventually, manifestFor, nodePaths, writeKubeadmConfig } from './install.ts';
import { customResourcesFor, operatorManifestFor, runPods } from './operator-install.ts';

const cluster = clusterPerFile(test, { systemPlugins: false });
const PAGE = 'install.md';
let shell: DocsShell | undefined;

/**
 * The chart package as `npm run build:chart` makes it, with the test node's layout as the
 * defaults of its values (netplug's node state, log and agent socket; the Installation's CNI
 * directories): values given on the command line merge over them.
 */
function chartForNode(c: Cluster): string {
  const paths = nodePaths(c);
  const source = join(c.dir, 'chart-source');
  cpSync(CHART_PATH, source, { recursive: true });
  const values = loadYaml(readFileSync(join(source, 'values.yaml'), 'utf8')) as any;
  Object.assign(values.node, { stateDir: paths.varLib, cniLogFile: paths.logFile, agentSocket: paths.agentSocket });
  values.installation.spec = { cni: { binDir: c.cniBinDir, confDir: c.cniConfDir } };
  writeFileSync(join(source, 'values.yaml'), dumpYaml(values));
  const charts = join(c.dir, 'charts');
  execFileSync(helmBinary(), ['package', source, '--destination', charts], { stdio: 'ignore' });
  return charts;
}

/** deploy/manifests/custom-resources.yaml with the node's CNI directories, its pool's CIDR set to the cluster's pod network (the page's edit). */
function customResourcesForNode(c: Cluster): string {
  const file = customResourcesFor(c);
  writeFileSync(file, readFileSync(file, 'utf8').replace('cidr: 192.168.0.0/16', `cidr: ${CLUSTER_CIDR}`));
  return file;
}

const docs = () => {
  if (!shell) throw new Error('no docs shell (see the first test)');
  return shell;
};
const conflist = () => join(cluster().cniConfDir, '10-netplug.conflist');
/**
 * What the page's removal leaves on the node: no conflist (install-cni's uninstall), and no nftables
 * table inet netplug (netplug-node's), whose fail-closed policy part would pass nothing to new pods.
 */
async function removed(t: ExecutionContext): Promise<void> {
  await eventually('the conflist removed from the node', async () => !existsSync(conflist()), 120);
  t.false(existsSync(conflist()));
  const table = () =>
    cluster()
      .inNode(nftBinary(), ['list', 'table', 'inet', 'netplug'])
      .then(
        () => true,
        () => false,
      );
  await eventually('table inet netplug deleted', async () => !(await table()), 60);
  t.false(await table(), 'no table inet netplug on the node');
}

test.serial('the image is imported as the page says', async (t) => {
  const c = cluster();
  const paths = nodePaths(c);
  // What kubeadm writes: the manifests' default pool takes its pod subnet.
  await writeKubeadmConfig(c);
  shell = docsShell(c, {
    manifests: {
      'netplug.yaml': manifestFor(c, 'netplug.yaml', paths),
      'netplug-etcd.yaml': manifestFor(c, 'netplug-etcd.yaml', paths),
      'netplug-operator.yaml': operatorManifestFor(c, paths),
      'custom-resources.yaml': customResourcesForNode(c),
    },
    distCharts: chartForNode(c),
    etcdEndpoints: `http://${c.nodeIp}:2379`,
  });
  await runCommands(t, docs(), docsCommands('Build and import the image'));
  t.regex(await docs().run('ctr -n k8s.io images ls -q'), new RegExp(`localhost/netplug:${NETPLUG_VERSION.replaceAll('.', '\\.')}`));
});

/** The section's command blocks: the install, then the removal. */
function docsCommands(section: string): string[] {
  return docsBlocks(PAGE, section).flat();
}
function installAndRemoval(section: string): [string[], string[]] {
  const blocks = docsBlocks(PAGE, section);
  if (blocks.length !== 2) throw new Error(`${PAGE} "${section}": ${blocks.length} blocks, expected the install and the removal`);
  return blocks as [string[], string[]];
}

for (const section of ['Install by manifest on the Kubernetes datastore', 'Install by manifest on etcd'])
  test.serial(`${section}: as the page says, then removed as it says`, async (t) => {
    const [install, removal] = installAndRemoval(section);
    const outputs = await runCommands(t, docs(), install);
    const version = outputs.at(-1) ?? '';
    t.regex(version, new RegExp(`Cluster Version:\\s+${NETPLUG_VERSION}`));
    t.regex(version, /Cluster Type:\s+k8s/);
    t.true(existsSync(conflist()));
    await runCommands(t, docs(), removal);
    await removed(t);
  });

test.serial('Install with the operator: the commands typed at once, in order, reach Available; removed as the page says', async (t) => {
  const [install, removal] = installAndRemoval('Install with the operator');
  const outputs = await runCommands(t, docs(), install);
  t.regex(outputs.at(-1) ?? '', new RegExp(`Cluster Version:\\s+${NETPLUG_VERSION}`));
  t.is((await getJson(cluster(), 'installation', 'default')).status.netplugVersion, NETPLUG_VERSION);
  await runCommands(t, docs(), removal);
  await removed(t);
  t.false((await cluster().kubectl('get', 'deployments', '-A')).includes('netplug-operator'));
});

test.serial('Install with helm: Available, 20 pods from its pool; removed as the page says', async (t) => {
  const c = cluster();
  const [install, removal] = installAndRemoval('Install with helm');
  // The test node's directories must survive the page's --set-json, or the plugins would land in this machine's /opt/cni/bin.
  const rendered = await docs().run(
    `helm template netplug dist/charts/netplug-operator-${CHART_VERSION}.tgz --show-only templates/installation.yaml --set-json 'installation.spec={"calicoNetwork":{"ipPools":[{"cidr":"${CLUSTER_CIDR}"}]}}'`,
  );
  t.like((loadYaml(rendered) as any).spec.cni, { binDir: c.cniBinDir, confDir: c.cniConfDir });
  const started = Date.now();
  const outputs = await runCommands(t, docs(), install);
  t.log(`helm install → all components Available: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  t.regex(outputs.at(-1) ?? '', new RegExp(`Cluster Version:\\s+${NETPLUG_VERSION}`));
  t.is((await getJson(c, 'installation', 'default')).status.netplugVersion, NETPLUG_VERSION);
  const podsStarted = Date.now();
  const pods = await runPods(c, 'web', BUSYBOX_IMAGE, 20);
  t.log(`Deployment create → 20 pods Running: ${((Date.now() - podsStarted) / 1000).toFixed(1)} s`);
  t.is(new Set(pods.map((pod) => pod.status.podIP)).size, 20);
  for (const pod of pods) t.true(pod.status.podIP.startsWith('10.244.'), `${pod.status.podIP} from the pool ${CLUSTER_CIDR}`);
  await c.kubectl('delete', 'deployment', 'web', '--wait=true');
  await runCommands(t, docs(), removal);
  await removed(t);
  t.false((await c.kubectl('get', 'deployments', '-A')).includes('netplug-operator'));
});
