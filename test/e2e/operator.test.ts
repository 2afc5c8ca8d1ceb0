// netplug installed by netplug-operator under the real kubelet, with the README's commands:
// kubectl apply --server-side of operator-crds.yaml, netplug-operator.yaml, custom-resources.yaml.
// Then the Installation is changed (policy setup timeout, a bad CIDR, HostLocal) and deleted.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

import test from 'ava';

import { BUSYBOX_IMAGE, clusterPerFile, getJson } from '../helpers/cluster.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { complaintsOverQuietSpell, eventually, imageArchive, NETPLUGCTL, nodePaths, type NodePaths } from './install.ts';
import { customResourcesFor, operatorManifestFor, runPods, statusCondition, waitAvailable } from './operator-install.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const cluster = clusterPerFile(test, { systemPlugins: false });
// host-local keeps its state in the host's /var/lib/cni/networks/<network>; removed (after the
// cluster stopped, whose pods' DELs still use it) if this file's test made it.
const HOST_LOCAL_STATE = '/var/lib/cni/networks/k8s-pod-network';
let hostLocalStateIsOurs = false;
test.after.always(() => {
  if (hostLocalStateIsOurs) rmSync(HOST_LOCAL_STATE, { recursive: true, force: true });
});
let paths: NodePaths;

const conflist = () => JSON.parse(readFileSync(join(cluster().cniConfDir, '10-netplug.conflist'), 'utf8'));
const patchInstallation = (patch: object) =>
  cluster().kubectl('patch', 'installation', 'default', '--type=merge', '-p', JSON.stringify(patch));
const daemonSet = () => getJson(cluster(), 'daemonset', '-n', 'netplug-system', 'netplug-node');

test.serial('apply operator-crds.yaml, netplug-operator.yaml and custom-resources.yaml: Available, 20 pods from its pool', async (t) => {
  const c = cluster();
  await c.importImage(imageArchive());
  paths = nodePaths(c);
  const started = Date.now();
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/operator-crds.yaml'));
  await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', operatorManifestFor(c, paths));
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', customResourcesFor(c));
  await waitAvailable(c);
  t.log(`apply → all components Available: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const installation = await getJson(c, 'installation', 'default');
  t.is(installation.status.netplugVersion, NETPLUG_VERSION);
  const version = (await run(NETPLUGCTL, ['--kubeconfig', c.kubeconfig, 'version'])).stdout;
  t.regex(version, new RegExp(`Cluster Version:\\s+${NETPLUG_VERSION}`));
  const podsStarted = Date.now();
  const pods = await runPods(c, 'web', BUSYBOX_IMAGE, 20);
  t.log(`Deployment create → 20 pods Running: ${((Date.now() - podsStarted) / 1000).toFixed(1)} s`);
  const addresses = pods.map((pod) => pod.status.podIP as string);
  t.is(new Set(addresses).size, 20);
  for (const address of addresses) t.true(address.startsWith('192.168.'), `${address} from default-ipv4-ippool 192.168.0.0/16`);
  await c.kubectl('delete', 'deployment', 'web', '--wait=true');
});

test.serial('quiet for 40 s: the operator, the node agent, the installer and the controllers log no warning or error', async (t) => {
  const c = cluster();
  const pod = async (namespace: string, app: string) =>
    (await getJson(c, 'pods', '-n', namespace, '-l', `k8s-app=${app}`)).items[0].metadata.name;
  const node = await pod('netplug-system', 'netplug-node');
  const complaints = await complaintsOverQuietSpell(c, [
    { namespace: 'netplug-operator', pod: await pod('netplug-operator', 'netplug-operator'), container: 'netplug-operator' },
    { namespace: 'netplug-system', pod: node, container: 'netplug-node' },
    { namespace: 'netplug-system', pod: node, container: 'install-cni' },
    { namespace: 'netplug-system', pod: await pod('netplug-system', 'netplug-kube-controllers'), container: 'netplug-kube-controllers' },
  ]);
  t.deepEqual(complaints, []);
});

test.serial(
  'linuxPolicySetupTimeoutSeconds: 10 reaches the conflist on the node; the pod starts once netplug-node reports its policy programmed',
  async (t) => {
    const c = cluster();
    const before = (await daemonSet()).spec.template.metadata.annotations;
    // Enforcement is on by default (the operator writes its default back): netplug-node reports each pod's policy programmed.
    t.deepEqual((await getJson(c, 'installation', 'default')).spec.policy, { enforcement: 'Enabled' });
    await patchInstallation({ spec: { calicoNetwork: { linuxPolicySetupTimeoutSeconds: 10 } } });
    await eventually(
      'the conflist with policy_setup_timeout_seconds 10',
      async () => conflist().plugins[0].policy_setup_timeout_seconds === 10,
    );
    // The ConfigMap is applied before the DaemonSet: install-cni may rewrite the conflist first.
    const after = await eventually('a new template hash on the DaemonSet', async () => {
      const annotations = (await daemonSet()).spec.template.metadata.annotations;
      return JSON.stringify(annotations) === JSON.stringify(before) ? undefined : annotations;
    });
    t.notDeepEqual(after, before, 'a new template hash rolls the DaemonSet');
    await waitAvailable(c);
    await c.kubectl('run', 'waited', `--image=${BUSYBOX_IMAGE}`, '--image-pull-policy=Never', '--', 'sleep', '3600');
    await c.kubectl('wait', '--for=condition=Ready', 'pod/waited', '--timeout=120s');
    // Policy is enforced (the default): netplug-node writes the pod's
    // status file in its socket's directory, where the conflist's endpoint_status_dir points, so the
    // plugin does not wait the 10 s out.
    t.is(conflist().plugins[0].endpoint_status_dir, join(dirname(paths.agentSocket), 'endpoint-status'));
    t.true(existsSync(join(dirname(paths.agentSocket), 'endpoint-status', 'k8s default%2Fwaited eth0')));
    t.notRegex(readFileSync(paths.logFile, 'utf8'), /did not report the pod's policy programmed/);
    await c.kubectl('delete', 'pod', 'waited', '--wait=true', '--grace-period=1');
    await patchInstallation({ spec: { calicoNetwork: { linuxPolicySetupTimeoutSeconds: 0 }, policy: { enforcement: 'Disabled' } } });
    await eventually('the conflist without the wait', async () => conflist().plugins[0].policy_setup_timeout_seconds === 0);
    await waitAvailable(c);
  },
);

test.serial('an Installation with a bad CIDR is Degraded with a message and changes nothing that runs', async (t) => {
  const c = cluster();
  const installation = await getJson(c, 'installation', 'default');
  const generation = (await daemonSet()).metadata.generation;
  const pools = installation.spec.calicoNetwork.ipPools;
  await patchInstallation({ spec: { calicoNetwork: { ipPools: [...pools, { cidr: '10.0.0.300/16' }] } } });
  const degraded = await eventually('Degraded', async () => {
    const condition = await statusCondition(c, 'netplug', 'Degraded');
    return condition.status === 'True' ? condition : undefined;
  });
  const after = (await daemonSet()).metadata.generation;
  await patchInstallation({ spec: { calicoNetwork: { ipPools: pools } } });
  t.regex(degraded.message ?? '', /10\.0\.0\.300\/16/);
  t.is(after, generation);
  await waitAvailable(c);
});

test.serial('cni.ipam.type HostLocal gives pods addresses from the node pod CIDR', async (t) => {
  const c = cluster();
  const podCidr: string = (await getJson(c, 'node', c.nodeName)).spec.podCIDR;
  // host-local keeps its state in the host's /var/lib/cni/networks/<network>: removed if this test made it.
  if (!existsSync(HOST_LOCAL_STATE)) hostLocalStateIsOurs = true;
  // Its pool without VXLAN, which host-local cannot serve (custom-resources.yaml asks for VXLANCrossSubnet).
  const pools = (await getJson(c, 'installation', 'default')).spec.calicoNetwork.ipPools.map((pool: object) => ({
    ...pool,
    encapsulation: 'None',
  }));
  await patchInstallation({ spec: { cni: { ipam: { type: 'HostLocal' } }, calicoNetwork: { ipPools: pools } } });
  await eventually('the conflist with host-local', async () => conflist().plugins[0].ipam.type === 'host-local');
  await waitAvailable(c);
  const [pod] = await runPods(c, 'local', BUSYBOX_IMAGE, 1).catch(async (err: Error) => {
    t.log(await c.kubectl('get', 'events', '--field-selector', 'reason=FailedCreatePodSandBox', '-o', 'custom-columns=MSG:.message'));
    throw err;
  });
  const prefix = podCidr.split('.').slice(0, 3).join('.');
  t.true(pod.status.podIP.startsWith(`${prefix}.`), `${pod.status.podIP} in ${podCidr}`);
  await c.kubectl('delete', 'deployment', 'local', '--wait=true');
});

test.serial('deleting the Installation removes what the operator made, also from the node', async (t) => {
  const c = cluster();
  await c.kubectl('delete', 'installation', 'default', '--wait=true', '--timeout=180s');
  await eventually(
    'namespace netplug-system gone',
    async () =>
      c.kubectl('get', 'namespace', 'netplug-system').then(
        () => undefined,
        () => true,
      ),
    120,
  );
  await eventually('the conflist removed from the node', async () => !existsSync(join(c.cniConfDir, '10-netplug.conflist')), 60);
  t.false(existsSync(join(c.cniConfDir, '10-netplug.conflist')));
  t.false((await c.kubectl('get', 'namespaces', '-o', 'name')).includes('namespace/netplug-system'));
});
