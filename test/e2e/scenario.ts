// The end-to-end scenario, run once per datastore under the real kubelet: install,
// 20 pods, connectivity, hostPort, clean release, a clear event for a missing pool, the node pod
// killed without disturbing pods, and uninstall.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import type { TestFn } from 'ava';

import { BUSYBOX_IMAGE, CLUSTER_CIDR, clusterPerFile, getJson } from '../helpers/cluster.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { complaintsOverQuietSpell, eventually, imageArchive, manifestFor, NETPLUGCTL, nodePaths, writeKubeadmConfig } from './install.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;

export type Datastore = 'kubernetes' | 'etcdv3';

export function installScenario(test: TestFn, datastore: Datastore): void {
  const cluster = clusterPerFile(test, { systemPlugins: false });
  const file = datastore === 'kubernetes' ? 'netplug.yaml' : 'netplug-etcd.yaml';
  let manifest = '';
  let installed: string[] = [];

  /** netplugctl as an administrator runs it: against the API server, or on the node for etcd. */
  const netplugctl = async (...args: string[]) => {
    if (datastore === 'kubernetes') return (await run(NETPLUGCTL, ['--kubeconfig', cluster().kubeconfig, ...args])).stdout;
    return cluster().inNode(NETPLUGCTL, ['--etcd-endpoints', 'http://127.0.0.1:2379', ...args]);
  };
  const podsOf = async (selector: string) => (await getJson(cluster(), 'pods', '-A', '-l', selector)).items as any[];
  const allReady = (pod: any) =>
    pod.status.containerStatuses?.length > 0 && pod.status.containerStatuses.every((status: any) => status.ready);

  test.serial(`apply the CRDs and the ${file} manifest: node pod 2/2, controllers 1/1, netplugctl version`, async (t) => {
    const c = cluster();
    await c.importImage(imageArchive());
    await writeKubeadmConfig(c);
    const data: Record<string, string> = datastore === 'etcdv3' ? { etcd_endpoints: `http://${c.nodeIp}:2379` } : {};
    manifest = manifestFor(c, file, nodePaths(c), data);
    const started = Date.now();
    await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
    await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
    await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
    const node = await eventually('the node pod ready 2/2', async () => {
      const [pod] = await podsOf('k8s-app=netplug-node');
      return pod && pod.status.containerStatuses?.length === 2 && allReady(pod) ? pod : undefined;
    });
    t.log(`apply → node pod ready 2/2: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await eventually('the controllers pod ready 1/1', async () => {
      const [pod] = await podsOf('k8s-app=netplug-kube-controllers');
      return pod && pod.status.containerStatuses?.length === 1 && allReady(pod);
    });
    t.log(`apply → controllers pod ready 1/1: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    t.is(node.spec.nodeName, c.nodeName);
    installed = readdirSync(c.cniBinDir).sort();
    for (const binary of ['netplug', 'netplug-ipam', 'portmap', 'host-local', 'loopback'])
      t.true(installed.includes(binary), `${binary} installed`);
    t.true(existsSync(join(c.cniConfDir, '10-netplug.conflist')));
    const version = await netplugctl('version');
    t.regex(version, new RegExp(`Client Version:\\s+${NETPLUG_VERSION}`));
    t.regex(version, new RegExp(`Cluster Version:\\s+${NETPLUG_VERSION}`));
    t.regex(version, /Cluster Type:\s+k8s/);
    const { pools } = JSON.parse(await netplugctl('pool', 'list', '-o', 'json'));
    t.deepEqual(
      pools.map((pool: any) => [pool.name, pool.cidr]),
      [['default-ipv4-ippool', CLUSTER_CIDR]],
    );
  });

  test.serial('a Deployment of 20 pods gets 20 distinct addresses from the default pool; pods and node reach them', async (t) => {
    const c = cluster();
    const started = Date.now();
    await c.kubectl('create', 'deployment', 'web', `--image=${BUSYBOX_IMAGE}`, '--replicas=20', '--', 'sleep', '3600');
    await c.kubectl(
      'patch',
      'deployment',
      'web',
      '--type=json',
      '-p',
      '[{"op":"add","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"Never"},{"op":"add","path":"/spec/template/spec/terminationGracePeriodSeconds","value":1}]',
    );
    const pods = await eventually(
      '20 pods Running',
      async () => {
        const items = (await podsOf('app=web')).filter(
          (pod) => pod.status.phase === 'Running' && pod.status.podIP && !pod.metadata.deletionTimestamp,
        );
        return items.length === 20 ? items : undefined;
      },
      300,
    );
    t.log(`Deployment create → 20 pods Running: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const addresses = pods.map((pod) => pod.status.podIP as string);
    t.is(new Set(addresses).size, 20);
    for (const address of addresses) t.true(address.startsWith('10.244.'), `${address} in ${CLUSTER_CIDR}`);
    const [first, second] = pods;
    t.regex(await c.kubectl('exec', first.metadata.name, '--', 'ping', '-c', '1', '-W', '5', second.status.podIP), / 0% packet loss/);
    t.regex(await c.inNode('ping', ['-c', '1', '-W', '5', first.status.podIP]), / 0% packet loss/);
  });

  test.serial('quiet for 40 s with 20 pods: the node agent, the installer and the controllers log no warning or error', async (t) => {
    const [node] = await podsOf('k8s-app=netplug-node');
    const [controllers] = await podsOf('k8s-app=netplug-kube-controllers');
    const complaints = await complaintsOverQuietSpell(cluster(), [
      { namespace: 'kube-system', pod: node.metadata.name, container: 'netplug-node' },
      { namespace: 'kube-system', pod: node.metadata.name, container: 'install-cni' },
      { namespace: 'kube-system', pod: controllers.metadata.name, container: 'netplug-kube-controllers' },
    ]);
    t.deepEqual(complaints, []);
  });

  test.serial('a hostPort pod answers on the node address through the chained portmap', async (t) => {
    const c = cluster();
    await c.kubectl(
      'run',
      'hostport',
      `--image=${BUSYBOX_IMAGE}`,
      '--image-pull-policy=Never',
      '--port=8080',
      '--overrides',
      JSON.stringify({
        spec: {
          containers: [
            {
              name: 'hostport',
              image: BUSYBOX_IMAGE,
              imagePullPolicy: 'Never',
              command: ['sh', '-c', 'mkdir -p /www && echo netplug-hostport > /www/index.html && httpd -f -p 8080 -h /www'],
              ports: [{ containerPort: 8080, hostPort: 18080 }],
            },
          ],
          terminationGracePeriodSeconds: 1,
        },
      }),
    );
    await c.kubectl('wait', '--for=condition=Ready', 'pod/hostport', '--timeout=120s');
    const body = await eventually(
      'an answer on the hostPort',
      async () => (await c.inNode('curl', ['-sS', '--max-time', '5', `http://${c.nodeIp}:18080/`])).trim() || undefined,
      60,
    );
    t.is(body, 'netplug-hostport');
    await c.kubectl('delete', 'pod', 'hostport', '--wait=true');
  });

  test.serial('deleting the Deployment leaves no address of its pods allocated and ipam check clean', async (t) => {
    const c = cluster();
    await c.kubectl('delete', 'deployment', 'web', '--wait=true');
    await eventually('the pods gone', async () => (await podsOf('app=web')).length === 0, 180);
    // What still holds an address: the controllers pod (in the host's network on etcd), and the
    // node's VXLAN tunnel address (the default pool is VXLAN CrossSubnet), on its device; nothing else.
    const tunnel = await c.inNode('ip', ['-4', '-o', 'addr', 'show', 'dev', 'vxlan.netplug']).catch(() => '');
    t.regex(tunnel, / inet [0-9.]+\/32 /, 'the node holds its VXLAN tunnel address');
    const holders = (await getJson(c, 'pods', '-A')).items.filter((pod: any) => !pod.spec.hostNetwork && pod.status.podIP).length + 1;
    const allocated = await eventually(
      `${holders} address(es) allocated`,
      async () => {
        const { pools } = JSON.parse(await netplugctl('ipam', 'show', '-o', 'json'));
        const count = pools.reduce((sum: number, pool: any) => sum + pool.allocated, 0);
        return count === holders ? count : undefined;
      },
      60,
    );
    t.is(allocated, datastore === 'etcdv3' ? 1 : 2);
    t.log(await netplugctl('ipam', 'check'));
  });

  test.serial('a pod annotated with a missing pool gets a FailedCreatePodSandBox event naming the pool', async (t) => {
    const c = cluster();
    await c.kubectl(
      'run',
      'lost',
      `--image=${BUSYBOX_IMAGE}`,
      '--image-pull-policy=Never',
      '--annotations',
      'cni.projectnet.org/ipv4pools=["no-such-pool"]',
      '--',
      'sleep',
      '3600',
    );
    const message = await eventually(
      'the event',
      async () => {
        const events = (await getJson(c, 'events', '--field-selector', 'involvedObject.name=lost,reason=FailedCreatePodSandBox'))
          .items as any[];
        return events.find((event) => event.message.includes('no-such-pool'))?.message;
      },
      120,
    );
    t.regex(message, /FailedCreatePodSandBox|failed to setup network/);
    t.regex(message, /pool "no-such-pool" does not exist/);
    await c.kubectl('delete', 'pod', 'lost', '--wait=true', '--grace-period=1');
  });

  test.serial('killing the node pod leaves running pods alone; it comes back ready', async (t) => {
    const c = cluster();
    await c.kubectl('run', 'steady', `--image=${BUSYBOX_IMAGE}`, '--image-pull-policy=Never', '--', 'sleep', '3600');
    await c.kubectl('wait', '--for=condition=Ready', 'pod/steady', '--timeout=120s');
    const before = (await getJson(c, 'pod', 'steady')).status.podIP as string;
    const [nodePod] = await podsOf('k8s-app=netplug-node');
    await c.kubectl('delete', 'pod', '-n', 'kube-system', nodePod.metadata.name, '--wait=true');
    await eventually('a new node pod ready 2/2', async () => {
      const [pod] = await podsOf('k8s-app=netplug-node');
      return pod && pod.metadata.uid !== nodePod.metadata.uid && allReady(pod) && pod.status.containerStatuses.length === 2;
    });
    const after = await getJson(c, 'pod', 'steady');
    t.is(after.status.podIP, before);
    t.is(after.status.containerStatuses[0].restartCount, 0);
    await c.inNode('ping', ['-c', '1', '-W', '5', before]);
    await c.kubectl('delete', 'pod', 'steady', '--wait=true', '--grace-period=1');
  });

  test.serial('deleting the manifest removes what install-cni put on the node', async (t) => {
    const c = cluster();
    // install-cni's last words, to say why if it kept the files.
    const [nodePod] = await podsOf('k8s-app=netplug-node');
    const installerLog = c
      .kubectl('logs', '-f', '-n', 'kube-system', nodePod.metadata.name, '-c', 'install-cni', '--tail=3')
      .catch((err: Error) => err.message);
    await c.kubectl('delete', '-f', manifest, '--wait=true');
    const remaining = () => [
      ...readdirSync(c.cniConfDir).filter((name) => name.includes('netplug')),
      ...readdirSync(c.cniBinDir).filter((name) => installed.includes(name)),
    ];
    try {
      await eventually(
        'the conflist, kubeconfig and binaries removed',
        async () => {
          const left = remaining();
          if (left.length > 0) throw new Error(`still there: ${left.join(', ')}`);
          return true;
        },
        120,
      );
    } catch (err) {
      // Say how the installer ended: its restarts and the run before the last, if any.
      const status = await getJson(c, 'pod', '-n', 'kube-system', nodePod.metadata.name).catch((e: Error) => e.message);
      t.log(`node pod status: ${JSON.stringify(typeof status === 'string' ? status : status.status?.containerStatuses)}`);
      t.log(
        `install-cni, previous run: ${await c
          .kubectl('logs', '-n', 'kube-system', nodePod.metadata.name, '-c', 'install-cni', '--previous', '--tail=20')
          .catch((e: Error) => e.message)}`,
      );
      const events = await getJson(
        c,
        'events',
        '-n',
        'kube-system',
        '--field-selector',
        `involvedObject.name=${nodePod.metadata.name}`,
      ).catch(() => ({ items: [] }));
      t.log(`node pod events: ${(events.items as any[]).map((e) => `${e.reason}: ${e.message}`).join('; ')}`);
      throw err;
    } finally {
      t.log(
        `install-cni: ${await Promise.race([installerLog, new Promise((resolve) => setTimeout(() => resolve('(still running)'), 5000))])}`,
      );
    }
    t.deepEqual(remaining(), []);
  });
}
