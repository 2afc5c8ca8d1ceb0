// netplug installed with helm under the real kubelet, as README "Install with helm" says: the
// chart packaged by `npm run build:chart` (scripts/build-chart.ts), `helm install -n
// netplug-operator --create-namespace`, values naming the test node's directories.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import test from 'ava';

import { CHART_VERSION } from '../../scripts/lib/chart-files.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { isolatedHelm } from '../chart/helm.ts';
import { BUSYBOX_IMAGE, clusterPerFile, getJson } from '../helpers/cluster.ts';
import { eventually, imageArchive, NETPLUGCTL, nodePaths } from './install.ts';
import { cniDirs, runPods, waitAvailable } from './operator-install.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const cluster = clusterPerFile(test, { systemPlugins: false });

test.serial('helm install of the packaged chart: Available, 20 pods from the default pool; uninstall removes it', async (t) => {
  const c = cluster();
  await c.importImage(imageArchive());
  const paths = nodePaths(c);
  const charts = join(c.dir, 'charts');
  execFileSync(process.execPath, [join(ROOT, 'scripts/build-chart.ts'), '--out', charts], { stdio: 'ignore' });
  const helm = isolatedHelm(t, c.kubeconfig);
  const started = Date.now();
  await helm(
    'install',
    'netplug',
    join(charts, `netplug-operator-${CHART_VERSION}.tgz`),
    '-n',
    'netplug-operator',
    '--create-namespace',
    '--set',
    `node.stateDir=${paths.varLib},node.cniLogFile=${paths.logFile},node.agentSocket=${paths.agentSocket},node.netnsDir=${paths.netnsDir}`,
    '--set-json',
    `installation.spec=${JSON.stringify({ cni: cniDirs(c) })}`,
  );
  await waitAvailable(c);
  t.log(`helm install → all components Available: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  t.is((await getJson(c, 'installation', 'default')).status.netplugVersion, NETPLUG_VERSION);
  t.regex((await run(NETPLUGCTL, ['--kubeconfig', c.kubeconfig, 'version'])).stdout, new RegExp(`Cluster Version:\\s+${NETPLUG_VERSION}`));
  const podsStarted = Date.now();
  const pods = await runPods(c, 'web', BUSYBOX_IMAGE, 20);
  t.log(
    `Deployment create → 20 pods Running: ${((Date.now() - podsStarted) / 1000).toFixed(1)} s (${((Date.now() - started) / 1000).toFixed(1)} s after helm install)`,
  );
  t.is(new Set(pods.map((pod) => pod.status.podIP)).size, 20);
  for (const pod of pods) t.true(pod.status.podIP.startsWith('192.168.'), `${pod.status.podIP} from default-ipv4-ippool 192.168.0.0/16`);
  await c.kubectl('delete', 'deployment', 'web', '--wait=true');
  // As the chart's NOTES say: the Installation first (the operator removes what it made), then the release.
  await c.kubectl('delete', 'installation', 'default', '--wait=true', '--timeout=180s');
  await helm('uninstall', 'netplug', '-n', 'netplug-operator', '--wait');
  await eventually('the conflist removed from the node', async () => !existsSync(join(c.cniConfDir, '10-netplug.conflist')), 60);
  t.false((await c.kubectl('get', 'deployments', '-A')).includes('netplug-operator'));
  rmSync(charts, { recursive: true, force: true });
});
