// The test cluster itself (scripts/lib/cluster.ts), with Debian's ptp + host-local as its CNI: a
// real kubelet runs pods on it, pods and host-network pods reach the API server through the
// `kubernetes` Service as on any cluster, and stop() leaves nothing behind.
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { mountsUnder } from '../../scripts/lib/cluster-leftovers.ts';
import { processesNaming } from '../../scripts/lib/cluster-processes.ts';
import {
  API_SERVICE_IP,
  apply,
  BUSYBOX_IMAGE,
  clusterPerFile,
  getJson,
  ptpConflist,
  startCluster,
  type Cluster,
} from '../helpers/cluster.ts';

const cluster = clusterPerFile(test);

/** ptp + host-local on the Node's pod CIDR, host-local's state in the cluster's directory. */
async function installPtp(node: Cluster): Promise<string> {
  const podCidr: string = (await getJson(node, 'node', node.nodeName)).spec.podCIDR;
  const conflist = ptpConflist('ptp-test', podCidr, join(node.dir, 'host-local'));

  writeFileSync(join(node.cniConfDir, '10-ptp.conflist'), JSON.stringify(conflist));
  return podCidr;
}

const busybox = (name: string, extra: Record<string, unknown> = {}) => ({
  containers: [{ name, image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
  terminationGracePeriodSeconds: 1,
  ...extra,
});

/** A plain HTTP request to the TLS port: Go's server answers it with a 400 naming the mistake. */
const probeApi = `printf 'GET /version HTTP/1.0\\r\\n\\r\\n' | nc -w 5 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT"`;
const API_ANSWER = 'Client sent an HTTP request to an HTTPS server';

test.serial('with a CNI configured the node turns Ready and a Deployment of 3 pods runs with addresses', async (t) => {
  const podCidr = await installPtp(cluster());
  await cluster().kubectl('wait', '--for=condition=Ready', `node/${cluster().nodeName}`, '--timeout=60s');
  await apply(cluster(), {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'sleepers', namespace: 'default' },
    spec: {
      replicas: 3,
      selector: { matchLabels: { app: 'sleepers' } },
      template: { metadata: { labels: { app: 'sleepers' } }, spec: busybox('sleeper') },
    },
  });
  await cluster().kubectl('rollout', 'status', 'deployment/sleepers', '--timeout=120s');
  const pods = (await getJson(cluster(), 'pods', '-l', 'app=sleepers')).items;
  t.is(pods.length, 3);
  t.deepEqual(
    pods.map((pod: any) => pod.status.phase),
    ['Running', 'Running', 'Running'],
  );
  const addresses = pods.map((pod: any) => pod.status.podIP as string);
  t.is(new Set(addresses).size, 3);
  const prefix = podCidr.split('.').slice(0, 3).join('.');
  for (const address of addresses) t.true(address.startsWith(`${prefix}.`), `${address} is in ${podCidr}`);
  // Each address is on the pod's eth0, as ptp put it there.
  const inside = await cluster().kubectl('exec', pods[0].metadata.name, '--', 'ip', '-4', 'addr', 'show', 'eth0');
  t.true(inside.includes(`inet ${pods[0].status.podIP}/`), inside);
});

test.serial('the administrator kubeconfig works from outside the node network namespace', async (t) => {
  const config = new k8s.KubeConfig();
  config.loadFromFile(cluster().kubeconfig);
  const node = await config.makeApiClient(k8s.CoreV1Api).readNode({ name: cluster().nodeName });
  t.is(node.status?.nodeInfo?.kubeletVersion.startsWith('v1.36.'), true, node.status?.nodeInfo?.kubeletVersion);
  t.deepEqual(node.status?.addresses?.find((address) => address.type === 'InternalIP')?.address, cluster().nodeIp);
});

test.serial('a pod reaches the API server through the kubernetes Service', async (t) => {
  const pod = (await getJson(cluster(), 'pods', '-l', 'app=sleepers')).items[0].metadata.name;
  t.is((await cluster().kubectl('exec', pod, '--', 'sh', '-c', 'echo $KUBERNETES_SERVICE_HOST')).trim(), API_SERVICE_IP);
  const answer = await cluster().kubectl('exec', pod, '--', 'sh', '-c', probeApi);
  t.true(answer.includes(API_ANSWER), answer);
});

test.serial('a host-network pod reaches the API server through the kubernetes Service', async (t) => {
  await apply(cluster(), {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'host-sleeper', namespace: 'default' },
    spec: busybox('host-sleeper', { hostNetwork: true }),
  });
  await cluster().kubectl('wait', '--for=condition=Ready', 'pod/host-sleeper', '--timeout=60s');
  const pod = await getJson(cluster(), 'pod', 'host-sleeper');
  t.is(pod.status.podIP, cluster().nodeIp);
  const answer = await cluster().kubectl('exec', 'host-sleeper', '--', 'sh', '-c', probeApi);
  t.true(answer.includes(API_ANSWER), answer);
});

test.serial('stop() leaves no process, network namespace, mount, container cgroup or file of the cluster', async (t) => {
  const other = await startCluster({ nodeName: 'netplug-node-2' });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : other.stop()));
  await installPtp(other);
  await other.kubectl('wait', '--for=condition=Ready', `node/${other.nodeName}`, '--timeout=60s');
  await apply(other, { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'default' }, spec: busybox('p') });
  await other.kubectl('wait', '--for=condition=Ready', 'pod/p', '--timeout=60s');
  const containers = readdirSync(join(other.dir, 'containerd/runc/k8s.io'));
  t.true(containers.length >= 2, 'a sandbox and its container run');
  t.true(mountsUnder(other.dir).length > 0);

  await other.stop();
  stopped = true;
  t.deepEqual(processesNaming(other.dir), []);
  t.false(existsSync(other.netnsPath));
  t.deepEqual(mountsUnder(other.dir), []);
  t.false(existsSync(other.dir));
  const cgroups = readdirSync('/sys/fs/cgroup').flatMap((controller) =>
    containers.map((id) => `/sys/fs/cgroup/${controller}/k8s.io/${id}`),
  );
  t.deepEqual(cgroups.filter(existsSync), []);
  const logLinks = existsSync('/var/log/containers') ? readdirSync('/var/log/containers') : [];
  t.deepEqual(
    logLinks.filter((link) => containers.some((id) => link.includes(id))),
    [],
  );
  // The cluster of this file is untouched by the other's stop.
  await cluster().kubectl('get', 'node', cluster().nodeName);
});
