// Upgrading a v3.30.0 host-local install (netplug-host-local.yaml, made with `kubectl create -f` as
// its README says) to 3.31 under the real kubelet, with the spec's "Host-local installs: extra
// steps" as written and in the order that works. v3.30.0's DaemonSet carries the init container
// upgrade-ipam, which moves host-local's allocations into netplug-ipam and deletes host-local's
// files (the reference's calico#11702): host-local then hands out again addresses running pods
// hold. kubectl-create owns it, so a server-side apply of the 3.31 manifest keeps it (field-managers.ts).
//
// One cluster per case (a reinstall would have to clean the Kubernetes datastore and host-local's
// state in between). Both installs carry the same edit, made at install time and made again in the
// 3.31 manifest as the spec asks: host-local's range narrowed to 32 addresses of the node's pod
// CIDR, so that its round robin comes back to the start of the range within a few pods instead of
// some 250 (v3.30.0's upgrade-ipam keeps host-local's last_reserved_ip file; the reference's
// removes the whole directory, which sends host-local back to the start at once).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { loadAllYaml } from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';

import { formatIp, parseIp, parsePrefix } from '../../ts/net/cidr.ts';
import { eventually, imageArchive } from '../e2e/install.ts';
import { type Cluster, getJson, startCluster } from '../helpers/cluster.ts';
import { installPrevious, manifestWithNodePaths, type PreviousInstall, waitRolledOut } from './install-previous.ts';
import { checkAfterUpgrade, describeRollout, type PodAddress, snapshotAddresses, startRolloutProbes, startWorkload } from './workload.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const NETWORK = 'k8s-pod-network';
const RANGE_SIZE = 32;
const NS = ['-n', 'kube-system'];

interface Range {
  start: string;
  end: string;
}

/** The first RANGE_SIZE addresses after the gateway (.1) of the node's IPv4 pod CIDR. */
async function narrowRange(cluster: Cluster): Promise<Range> {
  const podCidr: string = (await getJson(cluster, 'node', cluster.nodeName)).spec.podCIDR;
  const prefix = parsePrefix(podCidr);
  if (prefix?.family !== 4) throw new Error(`the node's pod CIDR ${podCidr} is not IPv4`);
  return { start: formatIp(4, prefix.base + 2n), end: formatIp(4, prefix.base + BigInt(RANGE_SIZE) + 1n) };
}

/** The install-time edit: host-local's range within the pod CIDR. */
const withRange = (template: string, range: Range) =>
  template.replace('"subnet": "usePodCidr"', `"subnet": "usePodCidr", "rangeStart": "${range.start}", "rangeEnd": "${range.end}"`);

/** Makes the edit on the v3.30.0 install and waits until install-cni has written it to the node. */
async function editInstalledRange(cluster: Cluster, range: Range): Promise<void> {
  const template: string = (await getJson(cluster, ...NS, 'configmap', 'netplug-config')).data.cni_network_config;
  await cluster.kubectl(
    ...NS,
    'patch',
    'configmap',
    'netplug-config',
    '--type=merge',
    '-p',
    JSON.stringify({ data: { cni_network_config: withRange(template, range) } }),
  );
  await eventually('the narrowed range in the node conflist', async () =>
    readFileSync(join(cluster.cniConfDir, '10-netplug.conflist'), 'utf8').includes(`"rangeEnd": "${range.end}"`),
  );
}

/** deploy/manifests/netplug-host-local.yaml with the test node's paths and the same edit (the spec: reapply your edits). */
function releaseManifest(cluster: Cluster, installed: PreviousInstall, range: Range): string {
  const source = join(ROOT, 'deploy/manifests/netplug-host-local.yaml');
  const configMap = (loadAllYaml(readFileSync(source, 'utf8')) as any[]).find((doc) => doc.kind === 'ConfigMap');
  const data = { cni_network_config: withRange(configMap.data.cni_network_config, range) };
  return manifestWithNodePaths(cluster, source, installed.paths, data, 'netplug-host-local.yaml');
}

/** The literal procedure: the CRDs, then the manifest, with server-side apply, then the rollout. */
async function applyRelease(cluster: Cluster, manifest: string): Promise<number> {
  const started = Date.now();
  await cluster.kubectl('apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'deploy/manifests/crds.yaml'));
  await cluster.kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
  await waitRolledOut(cluster, 'kube-system');
  return (Date.now() - started) / 1000;
}

/** host-local's records on the node: the addresses it holds (file per address) and where its round robin stands. */
function hostLocalState(installed: PreviousInstall): { held: Set<string>; lastReserved: string | undefined } {
  const dir = join(installed.paths.hostLocalDir, NETWORK);
  const names = existsSync(dir) ? readdirSync(dir) : [];
  const last = join(dir, 'last_reserved_ip.0');
  return {
    held: new Set(names.filter((name) => parseIp(name) !== undefined)),
    lastReserved: existsSync(last) ? readFileSync(last, 'utf8').trim() : undefined,
  };
}

const ipValue = (ip: string | undefined, fallback: bigint) => (ip === undefined ? fallback : (parseIp(ip)?.value ?? fallback));
const wrapped = (from: string | undefined, to: string | undefined) => ipValue(to, 0n) < ipValue(from, 0n);

/** How many of `held` host-local's round robin passed going from `from` (exclusive) to `to` (inclusive) around the range. */
function heldOnWalk(range: Range, from: string | undefined, to: string | undefined, held: Set<string>): number {
  const start = ipValue(range.start, 0n);
  const size = ipValue(range.end, 0n) - start + 1n;
  const first = ipValue(from, start - 1n) - start + 1n;
  const steps = (ipValue(to, start) - start - first + 1n + size) % size || size;
  let count = 0;
  for (let i = 0n; i < steps; i++) if (held.has(formatIp(4, start + ((first + i) % size)))) count++;
  return count;
}

const ROUTE_CONFLICT = /a route to (\d+\.\d+\.\d+\.\d+)\/32 already exists/g;

/**
 * Addresses host-local handed to a new pod while a running pod held them: netplug's data plane
 * refuses such an ADD (the host already routes that address to the running pod's interface), so
 * each shows as a FailedCreatePodSandBox event naming the address; the kubelet then tries again.
 */
async function duplicatesHandedOut(cluster: Cluster, running: Map<string, PodAddress>): Promise<Map<string, Set<string>>> {
  const holders = new Map([...running.values()].map((pod) => [pod.ip, `${pod.namespace}/${pod.name}`]));
  const events = (await getJson(cluster, 'events', '-A', '--field-selector', 'reason=FailedCreatePodSandBox')).items as any[];
  const found = new Map<string, Set<string>>();
  for (const event of events)
    for (const match of String(event.message).matchAll(ROUTE_CONFLICT)) {
      const ip = match[1] as string;
      if (!holders.has(ip)) continue;
      const to = found.get(ip) ?? new Set<string>();
      to.add(`${event.involvedObject?.namespace}/${event.involvedObject?.name}`);
      found.set(ip, to);
    }
  return found;
}

const describeDuplicates = (found: Map<string, Set<string>>, running: Map<string, PodAddress>) => {
  const holders = new Map([...running.values()].map((pod) => [pod.ip, `${pod.namespace}/${pod.name}`]));
  return [...found].map(([ip, to]) => `${ip} (held by ${holders.get(ip)}) handed to ${[...to].join(', ')}`).join('; ');
};

/** A Deployment of `replicas` busybox pods, not waited for. */
async function createPods(cluster: Cluster, name: string, replicas: number): Promise<void> {
  await cluster.kubectl(
    'create',
    'deployment',
    name,
    '--image=localhost/netplug-test/busybox:latest',
    `--replicas=${replicas}`,
    '--',
    'sleep',
    '3600',
  );
  await cluster.kubectl(
    'patch',
    'deployment',
    name,
    '--type=json',
    '-p',
    '[{"op":"add","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"Never"},{"op":"add","path":"/spec/template/spec/terminationGracePeriodSeconds","value":1}]',
  );
}

const runningOf = async (cluster: Cluster, selector: string) =>
  ((await getJson(cluster, 'pods', '-l', selector)).items as any[]).filter(
    (pod) => pod.status.phase === 'Running' && pod.status.podIP && !pod.metadata.deletionTimestamp,
  );

async function liveNodePod(cluster: Cluster): Promise<{ init: { name: string; image: string }[]; usePodCidr: unknown[] }> {
  const pod = (await getJson(cluster, ...NS, 'daemonset', 'netplug-node')).spec.template.spec;
  return {
    init: (pod.initContainers ?? []).map((c: any) => ({ name: c.name, image: c.image })),
    usePodCidr: pod.containers.find((c: any) => c.name === 'netplug-node').env.filter((e: any) => e.name === 'USE_POD_CIDR'),
  };
}

/** A started cluster with v3.30.0's host-local install, this release's image imported, the range edit and the workload running. */
async function installWithWorkload(t: ExecutionContext): Promise<{ cluster: Cluster; installed: PreviousInstall; range: Range }> {
  t.timeout(12 * 60_000);
  const cluster = await startCluster({ systemPlugins: false });
  t.teardown(() => cluster.stop());
  const installed = await installPrevious(cluster, 'host-local');
  await cluster.importImage(imageArchive());
  const range = await narrowRange(cluster);
  await editInstalledRange(cluster, range);
  await startWorkload(cluster);
  t.log(`cluster ${cluster.netns}; v3.30.0 host-local installed; range ${range.start}-${range.end}; workload running`);
  return { cluster, installed, range };
}

/** A shell in the node's network namespace with the cluster's kubectl and an administrator's KUBECONFIG, as an operator types the spec's commands. */
function nodeShell(cluster: Cluster): (script: string) => Promise<string> {
  const binaries = execFileSync('sh', [join(ROOT, 'scripts/kube-binaries.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  return (script) =>
    cluster.inNode('sh', ['-c', `export HOME=${cluster.dir}/home PATH=${binaries}:$PATH KUBECONFIG=${cluster.nodeKubeconfig}\n${script}`]);
}

// The spec's commands for a running install, as written.
const SET_ENV = 'kubectl set env daemonset/netplug-node -n kube-system -c netplug-node USE_POD_CIDR=true';
const JQ_PIPELINE = `kubectl get ds netplug-node -n kube-system -o json | jq 'del(.spec.template.spec.initContainers[]? | select(.name == "upgrade-ipam"))' | kubectl apply -f -`;
// The spec's precise form of the removal: a JSON patch that tests the name at the index first.
const JSON_PATCH = `kubectl patch daemonset netplug-node -n kube-system --type=json -p '[{"op":"test","path":"/spec/template/spec/initContainers/0/name","value":"upgrade-ipam"},{"op":"remove","path":"/spec/template/spec/initContainers/0"}]'`;

const upgradeIpamLog = async (cluster: Cluster) => {
  const [pod] = (await getJson(cluster, ...NS, 'pods', '-l', 'k8s-app=netplug-node')).items.filter(
    (p: any) => !p.metadata.deletionTimestamp,
  );
  return (await cluster.kubectl(...NS, 'logs', pod.metadata.name, '-c', 'upgrade-ipam')).trim();
};
const movedLine = (log: string) => /moved \d+ of \d+ host-local allocation\(s\)[^\n]*/.exec(log)?.[0] ?? log.split('\n').at(-1) ?? '';

// Without removing upgrade-ipam first. The spec's steps as written make a rollout before the apply
// on this install: its first step (USE_POD_CIDR on the live DaemonSet) rolls the node pods, and
// upgrade-ipam moves host-local's allocations; its command for the second, the jq pipeline, leaves
// upgrade-ipam in place (kubectl create made no last-applied configuration to delete it from). The
// apply keeps it too (kubectl-create owns it), and its rollout runs it once more, now as 3.31's
// netplug-node, which holds the plugin's rights on netplug-ipam (it serves the plugin's calls on
// the fast path): whatever host-local still records is moved as well.
test.serial(
  "the spec's steps as written (USE_POD_CIDR, the jq pipeline) then the apply: upgrade-ipam stays and runs, host-local hands out addresses running pods hold",
  async (t) => {
    const { cluster, installed, range } = await installWithWorkload(t);
    const shell = nodeShell(cluster);
    const before = await snapshotAddresses(cluster);
    const workloadAddresses = [...before.values()].filter((pod) => pod.namespace === 'default').map((pod) => pod.ip);
    t.true(
      workloadAddresses.every((ip) => hostLocalState(installed).held.has(ip)),
      'host-local records every running pod before',
    );

    await shell(SET_ENV);
    await waitRolledOut(cluster, 'kube-system');
    const moved = await upgradeIpamLog(cluster);
    t.log(`spec step 1 (${SET_ENV}) rolled the node pod; its upgrade-ipam: ${movedLine(moved)}`);
    t.log(`spec step 2 (the jq pipeline): ${(await shell(JQ_PIPELINE)).trim()}`);
    t.deepEqual(
      (await liveNodePod(cluster)).init.map((c) => c.name),
      ['upgrade-ipam'],
    );
    // A pod started now gives the apply's upgrade-ipam an allocation to try.
    await cluster.kubectl(
      'run',
      'between',
      '--image=localhost/netplug-test/busybox:latest',
      '--image-pull-policy=Never',
      '--',
      'sleep',
      '3600',
    );
    await cluster.kubectl('wait', '--for=condition=Ready', 'pod/between', '--timeout=120s');
    const seconds = await applyRelease(cluster, releaseManifest(cluster, installed, range));
    t.log(`server-side apply of netplug-host-local.yaml rolled out in ${seconds.toFixed(1)} s`);
    t.deepEqual(
      (await liveNodePod(cluster)).init,
      [{ name: 'upgrade-ipam', image: installed.release.image }],
      "kubectl-create's upgrade-ipam stays",
    );
    const underNewRole = await upgradeIpamLog(cluster);
    t.log(`upgrade-ipam under 3.31's role: ${movedLine(underNewRole)}`);
    t.regex(underNewRole, /moved \d+ of \d+ host-local allocation/);

    const running = await snapshotAddresses(cluster);
    const after = hostLocalState(installed);
    const forgotten = workloadAddresses.filter((ip) => !after.held.has(ip));
    t.log(
      `host-local no longer records ${forgotten.length} of ${workloadAddresses.length} running pods' addresses: ${forgotten.join(', ')}`,
    );
    t.true(forgotten.length > 0);

    // Enough new pods for host-local's round robin to pass the end of the range and start over.
    const toEnd = Number((parseIp(range.end)?.value ?? 0n) - (parseIp(after.lastReserved ?? range.start)?.value ?? 0n));
    const replicas = toEnd + 4;
    await createPods(cluster, 'after', replicas);
    t.teardown(() => cluster.kubectl('delete', 'deployment', 'after', '--ignore-not-found'));
    const found = await eventually(
      'addresses running pods hold handed to new pods',
      async () => {
        const duplicates = await duplicatesHandedOut(cluster, running);
        return duplicates.size >= 3 ? duplicates : undefined;
      },
      // The kubelet retries each refused sandbox with a growing back-off; on a loaded machine the
      // third refusal can take longer than 5 minutes.
      600,
    );
    t.log(
      `${replicas} pods created after the rollout; host-local handed out ${found.size} addresses that running pods hold: ${describeDuplicates(found, running)}`,
    );
    t.true(found.size > 0);
    // netplug's data plane refused each (the host routes that address to the running pod), so no two running pods share one.
    const addresses = [...(await snapshotAddresses(cluster)).values()].map((pod) => pod.ip);
    t.deepEqual(
      addresses.filter((ip, i) => addresses.indexOf(ip) !== i),
      [],
    );
  },
);

test.serial(
  'with the steps: upgrade-ipam removed from the live DaemonSet, USE_POD_CIDR set, then the manifest: running pods keep addresses, none handed out twice',
  async (t) => {
    const { cluster, installed, range } = await installWithWorkload(t);
    const shell = nodeShell(cluster);
    const before = await snapshotAddresses(cluster);
    const probes = await startRolloutProbes(cluster);
    const started = Date.now();

    // The jq pipeline changes nothing here but the last-applied annotation (no rollout).
    t.log(`the spec's jq pipeline: ${(await shell(JQ_PIPELINE)).trim()}`);
    t.deepEqual(
      (await liveNodePod(cluster)).init.map((c) => c.name),
      ['upgrade-ipam'],
      'the pipeline left upgrade-ipam in place',
    );
    // Removal first, then USE_POD_CIDR: each rolls v3.30.0's node pod, neither runs upgrade-ipam.
    await shell(JSON_PATCH);
    await shell(SET_ENV);
    await waitRolledOut(cluster, 'kube-system');
    const seconds = await applyRelease(cluster, releaseManifest(cluster, installed, range));
    const stats = await probes.stop();
    t.log(
      `steps + server-side apply: ${describeRollout((Date.now() - started) / 1000, stats)} (the apply's own rollout ${seconds.toFixed(1)} s)`,
    );

    const live = await liveNodePod(cluster);
    t.deepEqual(live.init, []);
    t.deepEqual(live.usePodCidr, [{ name: 'USE_POD_CIDR', value: 'true' }]);
    await checkAfterUpgrade(t, cluster, installed, before, stats);
    const podCidr: string = (await getJson(cluster, 'node', cluster.nodeName)).spec.podCIDR;
    t.is(readFileSync(join(installed.paths.varLib, 'pod-cidrs'), 'utf8'), `${podCidr}\n`, 'netplug-node recorded the pod CIDR');

    // host-local still records every running pod, and new pods get the addresses left, none twice.
    const running = await snapshotAddresses(cluster);
    const state = hostLocalState(installed);
    t.deepEqual(
      [...running.values()].filter((pod) => pod.namespace === 'default' && !state.held.has(pod.ip)).map((pod) => `${pod.name} ${pod.ip}`),
      [],
    );
    const free = RANGE_SIZE - state.held.size;
    const replicas = free - 1;
    // All free addresses but one: host-local's round robin walks almost the whole range from where it
    // stands, among the running pods' addresses, which it must skip. Where it stands, and so whether
    // it passes the range's end, depends on how many pods the rollouts made (the machine's speed):
    // the walk is logged, the claim is that no running pod's address is handed out.
    await createPods(cluster, 'after', replicas);
    t.teardown(() => cluster.kubectl('delete', 'deployment', 'after', '--ignore-not-found'));
    const created = await eventually(
      `${replicas} new pods Running`,
      async () => {
        const pods = await runningOf(cluster, 'app=after');
        return pods.length === replicas ? pods : undefined;
      },
      300,
    );
    const held = new Set([...running.values()].map((pod) => pod.ip));
    t.deepEqual(
      created.filter((pod) => held.has(pod.status.podIP)).map((pod) => `${pod.metadata.name} ${pod.status.podIP}`),
      [],
    );
    const duplicates = await duplicatesHandedOut(cluster, running);
    const finalReserved = hostLocalState(installed).lastReserved;
    const crossed = heldOnWalk(range, state.lastReserved, finalReserved, held);
    t.log(
      `${replicas} pods created after the upgrade (${free} addresses of the range were free), all networked; ` +
        `host-local's round robin went from ${state.lastReserved} to ${finalReserved}${wrapped(state.lastReserved, finalReserved) ? ` past ${range.end}` : ''}, ` +
        `over ${crossed} running pods' addresses; addresses of running pods handed out: ${duplicates.size}`,
    );
    t.is(duplicates.size, 0);
    const addresses = [...(await snapshotAddresses(cluster)).values()].map((pod) => pod.ip);
    t.deepEqual(
      addresses.filter((ip, i) => addresses.indexOf(ip) !== i),
      [],
    );
  },
);
