// A cluster of three nodes on two subnets (scripts/lib/cluster-nodes.ts) moved from etcd to the
// Kubernetes datastore under the real kubelets, as README "Move from etcd to the Kubernetes
// datastore" says: netplug-etcd.yaml installed and pods running on every node; lock, export,
// import, netplug.yaml applied with server-side apply (netplug-node rolls node by node), unlock.
// Throughout, pods ping each other across the nodes (node 1 to node 3 over VXLAN, node 2 to node 1
// directly): nodes already switched keep their routes to nodes not yet switched, as the node
// addresses, tunnel addresses and MACs are carried over, so at most 1 % of the pings is lost. The
// running pods keep their addresses (same pods, no restart), a pod created while locked waits and
// is networked after unlock (how long ADDs were refused is logged), new pods get addresses none of
// the old ones holds, and ipam check is clean.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import test from 'ava';

import { apply, BUSYBOX_IMAGE, clusterPerFile, getJson } from '../helpers/cluster.ts';
import { eventually, imageArchive, manifestFor, NETPLUGCTL, nodePaths, writeKubeadmConfig } from './install.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const cluster = clusterPerFile(test, { nodes: 3, systemPlugins: false });

/** netplugctl on etcd (from the node, where etcd listens) and on the Kubernetes datastore. */
const onEtcd = (...args: string[]) => cluster().inNode(NETPLUGCTL, ['--etcd-endpoints', 'http://127.0.0.1:2379', ...args]);
const onKubernetes = async (...args: string[]) => (await run(NETPLUGCTL, ['--kubeconfig', cluster().kubeconfig, ...args])).stdout;

const podsOf = async (selector: string) => (await getJson(cluster(), 'pods', '-A', '-l', selector)).items as any[];
const allReady = (pod: any) => pod.status.containerStatuses?.length > 0 && pod.status.containerStatuses.every((s: any) => s.ready);
const running = (pods: any[]) =>
  pods.filter((pod) => pod.status.phase === 'Running' && pod.status.podIP && !pod.metadata.deletionTimestamp);

let before: Map<string, { ip: string; uid: string }>;

/** Resolves when each node runs a node pod ready 2/2, none of them one of `notUids` (the pods before a change). */
async function nodePodsReady(what: string, notUids = new Set<string>()) {
  return eventually(
    what,
    async () => {
      const pods = (await podsOf('k8s-app=netplug-node')).filter((pod) => !pod.metadata.deletionTimestamp);
      const ready = pods.filter((pod) => !notUids.has(pod.metadata.uid) && pod.status.containerStatuses?.length === 2 && allReady(pod));
      return ready.length === cluster().nodes.length && pods.length === ready.length ? ready : undefined;
    },
    300,
  );
}

/** Two pods pinging across nodes every 0.2 s: pinger-1 (node 1) to pinger-3 (node 3, the other subnet), pinger-2 to pinger-1. */
const PINGS = [
  ['pinger-1', 'pinger-3'],
  ['pinger-2', 'pinger-1'],
] as const;

async function startPingers(): Promise<void> {
  const c = cluster();
  await apply(
    c,
    ...c.nodes.map((node, index) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `pinger-${index + 1}`, labels: { app: 'pinger' } },
      spec: {
        nodeName: node.name,
        terminationGracePeriodSeconds: 1,
        containers: [{ name: 'ping', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
      },
    })),
  );
  await c.kubectl('wait', '--for=condition=Ready', 'pod', '-l', 'app=pinger', '--timeout=180s');
  for (const [from, to] of PINGS) {
    const peer = (await getJson(c, 'pod', to)).status.podIP as string;
    await eventually(
      `${from} → ${to} (${peer})`,
      async () =>
        (await c.kubectl('exec', from, '--', 'ping', '-c', '1', '-W', '2', peer).catch(() => '')).includes(' 0% packet loss') || undefined,
    );
    await c.kubectl('exec', from, '--', 'sh', '-c', `ping -i 0.2 ${peer} > /tmp/ping.log 2>&1 & echo $! > /tmp/ping.pid`);
  }
}

/** Stops the pingers; each one's packets sent and answered. */
async function stopPingers(): Promise<{ from: string; to: string; sent: number; received: number }[]> {
  const c = cluster();
  const stats = [];
  for (const [from, to] of PINGS) {
    await c.kubectl('exec', from, '--', 'sh', '-c', 'kill -INT $(cat /tmp/ping.pid)');
    const summary = await eventually(
      `${from}'s ping statistics`,
      async () =>
        /(\d+) packets transmitted, (\d+) packets received/.exec(await c.kubectl('exec', from, '--', 'cat', '/tmp/ping.log')) ?? undefined,
      30,
    );
    stats.push({ from, to, sent: Number(summary[1]), received: Number(summary[2]) });
  }
  await c.kubectl('delete', 'pods', '-l', 'app=pinger', '--wait=true', '--grace-period=1');
  return stats;
}

test.serial('netplug-etcd.yaml installed on three nodes; 6 pods running on etcd, spread over the nodes', async (t) => {
  const c = cluster();
  await c.importImage(imageArchive());
  await writeKubeadmConfig(c);
  const manifest = manifestFor(c, 'netplug-etcd.yaml', nodePaths(c), { etcd_endpoints: `http://${c.nodeIp}:2379` });
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
  await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
  await nodePodsReady('a node pod ready 2/2 on each node');
  await c.kubectl('create', 'deployment', 'web', `--image=${BUSYBOX_IMAGE}`, '--replicas=6', '--', 'sleep', '3600');
  await c.kubectl(
    'patch',
    'deployment',
    'web',
    '--type=json',
    '-p',
    '[{"op":"add","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"Never"},{"op":"add","path":"/spec/template/spec/terminationGracePeriodSeconds","value":1}]',
  );
  const pods = await eventually('6 pods Running', async () => {
    const up = running(await podsOf('app=web'));
    return up.length === 6 ? up : undefined;
  });
  before = new Map(pods.map((pod) => [pod.metadata.name, { ip: pod.status.podIP, uid: pod.metadata.uid }]));
  t.is(new Set(pods.map((pod) => pod.status.podIP)).size, 6);
  t.log(`the pods' nodes: ${pods.map((pod) => pod.spec.nodeName).join(', ')}`);
  await startPingers();
});

test.serial('lock, export, import, netplug.yaml applied, unlock: pods keep their addresses; new pods get fresh ones', async (t) => {
  const c = cluster();
  const started = Date.now();
  t.regex(await onEtcd('datastore', 'migrate', 'lock'), /locked: ClusterInformation "default" datastoreReady false/);

  // A pod created while locked: its sandbox fails with the lock's message, and the kubelet retries.
  await c.kubectl('run', 'late', `--image=${BUSYBOX_IMAGE}`, '--image-pull-policy=Never', '--', 'sleep', '3600');
  const message = await eventually('the locked event', async () => {
    const events = (await getJson(c, 'events', '--field-selector', 'involvedObject.name=late,reason=FailedCreatePodSandBox'))
      .items as any[];
    return events.find((event) => event.message.includes('locked for a migration'))?.message;
  });
  t.regex(message, /datastore migrate unlock/);

  const file = join(c.dir, 'netplug-export.yaml');
  t.regex(await onEtcd('datastore', 'migrate', 'export', '-f', file), /^exported 1 ClusterInformation, 3 nodes, .* 1 pools from etcd/);
  t.regex(await onKubernetes('datastore', 'migrate', 'import', '-f', file), /^imported .* 1 pools into the Kubernetes API/);

  // The nodes' addresses, tunnel addresses and MACs, carried over: the nodes already switched route to those not yet.
  for (const node of c.nodes) {
    const annotations = (await getJson(c, 'node', node.name)).metadata.annotations ?? {};
    t.is(annotations['projectnet.org/IPv4Address']?.split('/')[0], node.address, `${node.name}'s address imported`);
    t.truthy(annotations['projectnet.org/IPv4VXLANTunnelAddr'], `${node.name}'s VXLAN tunnel address imported`);
    t.truthy(annotations['projectnet.org/VXLANTunnelMACAddr'], `${node.name}'s VXLAN MAC imported`);
  }

  const etcdNodePods = new Set((await podsOf('k8s-app=netplug-node')).map((pod) => pod.metadata.uid as string));
  const manifest = manifestFor(c, 'netplug.yaml', nodePaths(c));
  await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
  await nodePodsReady('every node pod on the Kubernetes datastore, ready 2/2', etcdNodePods);
  await eventually('the conflist on the Kubernetes datastore', async () => {
    const conflist = JSON.parse(readFileSync(join(c.cniConfDir, '10-netplug.conflist'), 'utf8'));
    return conflist.plugins[0].datastore_type === 'kubernetes';
  });
  t.regex(await onKubernetes('datastore', 'migrate', 'unlock'), /unlocked/);
  t.log(`ADDs refused for ${((Date.now() - started) / 1000).toFixed(1)} s (lock → unlocked on the Kubernetes datastore)`);

  // The running pods: the same pods, the same addresses, held by them in the Kubernetes datastore.
  const after = running(await podsOf('app=web'));
  t.deepEqual(new Map(after.map((pod) => [pod.metadata.name, { ip: pod.status.podIP, uid: pod.metadata.uid }])), before);
  for (const pod of after) {
    t.is(pod.status.containerStatuses[0].restartCount, 0);
    const shown = JSON.parse(await onKubernetes('ipam', 'show', '--ip', pod.status.podIP, '-o', 'json'));
    t.like(shown, { allocated: true, pod: pod.metadata.name });
  }
  // The pod created while locked, and 6 more: networked, with addresses no old pod holds.
  await c.kubectl('wait', '--for=condition=Ready', 'pod/late', '--timeout=180s');
  await c.kubectl('scale', 'deployment', 'web', '--replicas=12');
  const grown = await eventually('12 pods Running', async () => {
    const up = running(await podsOf('app=web'));
    return up.length === 12 ? up : undefined;
  });
  const late = await getJson(c, 'pod', 'late');
  const fresh = [...grown.filter((pod) => !before.has(pod.metadata.name)).map((pod) => pod.status.podIP), late.status.podIP];
  const old = new Set([...before.values()].map((p) => p.ip));
  t.is(fresh.length, 7);
  t.deepEqual(
    fresh.filter((ip) => old.has(ip)),
    [],
  );
  t.is(new Set([...old, ...fresh]).size, 13);
  // Old and new pods reach each other.
  const [oldPod] = after;
  t.regex(await c.kubectl('exec', oldPod.metadata.name, '--', 'ping', '-c', '1', '-W', '5', late.status.podIP), / 0% packet loss/);

  // A migrated pod deleted: its address released in the Kubernetes datastore; ipam check clean.
  await c.kubectl('delete', 'pod', oldPod.metadata.name, '--wait=true');
  await eventually('the migrated address released', async () => {
    const shown = JSON.parse(await onKubernetes('ipam', 'show', '--ip', oldPod.status.podIP, '-o', 'json'));
    return shown.allocated === false || shown.pod !== oldPod.metadata.name;
  });
  t.regex(await onKubernetes('ipam', 'check'), /no problems found/);
  // The pings, from before the lock until now: through the switch and the new pods after it.
  for (const ping of await stopPingers()) {
    const lost = ((ping.sent - ping.received) / ping.sent) * 100;
    t.log(`${ping.from} → ${ping.to}: ${ping.received} of ${ping.sent} pings answered`);
    t.true(ping.sent > 0 && lost <= 1, `${ping.from} → ${ping.to}: ${lost.toFixed(1)} % of ${ping.sent} pings lost`);
  }
  await c.kubectl('delete', 'pod', 'late', '--wait=true', '--grace-period=1');
  await c.kubectl('delete', 'deployment', 'web', '--wait=true');
});
