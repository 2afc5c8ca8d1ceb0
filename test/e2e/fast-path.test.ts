// The fast path as installed by default, under the real kubelet: after the manifest install the
// plugin on the node is the shim with the one-shot beside it, and pods are served by netplug-node
// (the CNI log's `via`, and the agent's /metrics scraped from the node); with fast_path "false" in
// netplug-config and the DaemonSet restarted, install-cni puts the one-shot plugin in place of the
// shim, the agent stops serving, and new pods are served by the one-shot. The node is one a new
// user may well have: its pod network namespaces on a private mount (no systemd: no mount
// propagation into pods), and its runtime's CNI directories elsewhere than /opt/cni/bin and
// /etc/cni/net.d, the manifest edited for them as a user does (each hostPath, nothing else).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

import test from 'ava';

import { BUSYBOX_IMAGE, clusterPerFile, getJson } from '../helpers/cluster.ts';
import { eventually, imageArchive, manifestFor, nodePaths, writeKubeadmConfig } from './install.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const cluster = clusterPerFile(test, { systemPlugins: false, netnsMount: 'private' });
const METRICS_PORT = 9091;

const podsOf = async (selector: string) => (await getJson(cluster(), 'pods', '-A', '-l', selector)).items as any[];
const allReady = (pod: any) => pod.status.containerStatuses?.length > 0 && pod.status.containerStatuses.every((s: any) => s.ready);

/** The node pod, once the one named differently from `replaced` (a restart's) is ready 2/2. */
async function nodePodReady(replaced?: string): Promise<any> {
  return eventually('the node pod ready 2/2', async () => {
    const pods = (await podsOf('k8s-app=netplug-node')).filter((pod) => pod.metadata.name !== replaced && !pod.metadata.deletionTimestamp);
    return pods.length === 1 && pods[0].status.containerStatuses?.length === 2 && allReady(pods[0]) ? pods[0] : undefined;
  });
}

/** A Deployment of `replicas` busybox pods; resolves to their names once all are Running. */
async function runPods(name: string, replicas: number): Promise<string[]> {
  const c = cluster();
  await c.kubectl('create', 'deployment', name, `--image=${BUSYBOX_IMAGE}`, `--replicas=${replicas}`, '--', 'sleep', '3600');
  await c.kubectl(
    'patch',
    'deployment',
    name,
    '--type=json',
    '-p',
    '[{"op":"add","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"Never"},{"op":"add","path":"/spec/template/spec/terminationGracePeriodSeconds","value":1}]',
  );
  const pods = await eventually(
    `${replicas} pods of ${name} Running`,
    async () => {
      const running = (await podsOf(`app=${name}`)).filter((pod) => pod.status.phase === 'Running' && pod.status.podIP);
      return running.length === replicas ? running : undefined;
    },
    300,
  );
  return pods.map((pod) => pod.metadata.name as string);
}

/** Which program networked each pod, from the plugin's "workload networked" lines in the CNI log. */
function servedBy(logFile: string, pods: readonly string[]): Record<string, string[]> {
  const lines = readFileSync(logFile, 'utf8').split('\n');
  return Object.fromEntries(
    pods.map((pod) => [
      pod,
      lines
        .filter((line) => line.includes(' workload networked ') && line.includes(`pod="default/${pod}"`))
        .map((line) => /\bvia="([^"]+)"/.exec(line)?.[1] ?? '(none)'),
    ]),
  );
}

/** The agent's /metrics, scraped on the node's address. */
async function agentText(): Promise<string> {
  const c = cluster();
  return c.inNode('curl', ['-sS', '--max-time', '5', `http://${c.nodeIp}:${METRICS_PORT}/metrics`]);
}

/** netplug_cni_request_duration_seconds_count of ADDs that succeeded, scraped on the node's address. */
async function agentAdds(): Promise<number> {
  const text = await agentText();
  const match = /^netplug_cni_request_duration_seconds_count\{command="ADD",result="success"\} (\d+)$/m.exec(text);
  return Number(match?.[1] ?? 0);
}

test.serial(
  'installed by default: the shim is netplug, netplug-oneshot beside it; pods are served by netplug-node; /metrics from the node',
  async (t) => {
    const c = cluster();
    const paths = nodePaths(c);
    await c.importImage(imageArchive());
    await writeKubeadmConfig(c);
    await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
    await c.kubectl('wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s');
    await c.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifestFor(c, 'netplug.yaml', paths));
    t.is((await c.inNode('findmnt', ['-n', '-o', 'PROPAGATION', c.netnsDir])).trim(), 'private');
    const applied = readFileSync(manifestFor(c, 'netplug.yaml', paths), 'utf8');
    t.true(applied.includes(`mountPath: ${c.cniBinDir}\n`), 'the agent mounts the moved plugin directory at its host path');
    await nodePodReady();

    const shim = join(c.cniBinDir, 'netplug');
    const oneShot = join(c.cniBinDir, 'netplug-oneshot');
    t.true(existsSync(oneShot), 'netplug-oneshot installed');
    t.true(statSync(shim).size < 3e6, `the shim is small: ${statSync(shim).size} bytes`);
    await eventually('the agent serves its socket', async () => existsSync(paths.agentSocket) || undefined, 60);
    t.is(statSync(paths.agentSocket).mode & 0o777, 0o600);

    const pods = await runPods('fast', 5);
    for (const [pod, via] of Object.entries(servedBy(paths.logFile, pods))) t.deepEqual(via, ['netplug-node'], pod);
    const served = await agentAdds();
    t.true(served >= 5, `the agent counted ${served} ADDs`);
    t.false((await agentText()).includes('netplug_cni_requests_declined_total{'), 'no call declined');
    const text = await c.inNode('curl', ['-sS', '--max-time', '5', `http://${c.nodeIp}:${METRICS_PORT}/metrics`]);
    for (const name of ['netplug_datastore_requests_total', 'netplug_ipam_allocations', 'process_resident_memory_bytes'])
      t.regex(text, new RegExp(`^# TYPE ${name} `, 'm'));
    await c.kubectl('delete', 'deployment', 'fast', '--wait=true');
    await eventually('the pods of fast gone', async () => (await podsOf('app=fast')).length === 0 || undefined, 180);
  },
);

test.serial(
  'fast_path "false" and a restart: the one-shot plugin is netplug, netplug-oneshot removed, the agent does not serve; pods are served by the one-shot',
  async (t) => {
    const c = cluster();
    const paths = nodePaths(c);
    const [before] = await podsOf('k8s-app=netplug-node');
    await c.kubectl('-n', 'kube-system', 'patch', 'configmap', 'netplug-config', '--type=merge', '-p', '{"data":{"fast_path":"false"}}');
    await c.kubectl('-n', 'kube-system', 'rollout', 'restart', 'daemonset/netplug-node');
    await nodePodReady(before.metadata.name);

    await eventually('netplug-oneshot removed', async () => !existsSync(join(c.cniBinDir, 'netplug-oneshot')) || undefined, 60);
    t.true(statSync(join(c.cniBinDir, 'netplug')).size > 3e6, 'netplug is the one-shot plugin');
    t.false(existsSync(paths.agentSocket), 'the agent removed its socket and serves none');
    const adds = await agentAdds();

    const pods = await runPods('slow', 3);
    for (const [pod, via] of Object.entries(servedBy(paths.logFile, pods))) t.deepEqual(via, ['one-shot'], pod);
    t.is(await agentAdds(), adds, 'the agent served none of them');
    await c.kubectl('delete', 'deployment', 'slow', '--wait=true');
    await eventually('the pods of slow gone', async () => (await podsOf('app=slow')).length === 0 || undefined, 180);
  },
);
