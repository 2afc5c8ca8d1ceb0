// netplugctl datastore migrate, the built executables against a real etcd and a real
// kube-apiserver with netplug's CRDs: containers (network namespaces) ADDed by the built plugin on
// etcd; lock refuses ADD with code 11 while DEL goes on; export, import into the Kubernetes
// datastore, the netconf switched, unlock; the running containers keep their addresses, new ones
// get others, a migrated container's DEL releases its address there, and ipam check is clean.
// Refusals (unlocked export, a non-empty target, a file that is not an export) are one line and
// write nothing.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';
import * as k8s from '@kubernetes/client-node';
import { load } from 'js-yaml';

import { ensureClusterInfo } from '../../ts/ipam/cluster-info.ts';
import { openStore } from '../../ts/store/open.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { hasStackTrace, hostLocalNetconf, invoke, tempDir } from '../helpers/cni.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { addressesOf, ctl, NETPLUG_IPAM, NETPLUGCTL, totalAllocated } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';
import {
  createPod,
  DATASTORE_RULES,
  installCrds,
  PLUGIN_RULES,
  podArgs,
  removeIpamLockFileAfter,
  startKube,
  type Kube,
} from '../helpers/kube.ts';

interface Container {
  id: string;
  netns: string;
  node: string;
  args: string;
  address?: string;
}

const NODES = ['mig-a', 'mig-b'];
const NETWORK = 'migr';

/** Exits 1 with exactly one line on stderr, no stack trace. */
function refusedWith(t: ExecutionContext, run: { status: number | null; stdout: string; stderr: string }, message: RegExp): void {
  t.is(run.status, 1, run.stderr + run.stdout);
  t.is(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
  t.regex(run.stderr, message);
  t.false(hasStackTrace(run.stderr));
}

test('etcd to the Kubernetes datastore: lock, export, import, switch, unlock; running containers keep their addresses', async (t) => {
  t.timeout(10 * 60_000);
  removeIpamLockFileAfter(t);
  const [etcd, kube] = await Promise.all([startEtcd(t), startKube(t)]);
  await installCrds(kube);
  const pluginKubeconfig = (await kube.identityWith('netplug-cni-migrate', [...PLUGIN_RULES, ...DATASTORE_RULES])).kubeconfig;
  for (const name of NODES) await kube.core.createNode({ body: { metadata: { name, labels: { rack: 'a' } } } });
  const dir = tempDir(t, 'migrate');
  const kctl = (...args: string[]) => kubeCtl(kube, ...args);

  // The etcd cluster as it runs: a pool, node registrations (one of a node Kubernetes no longer has), ClusterInformation.
  for (const args of [
    ['pool', 'create', 'mig', '--cidr', '10.181.0.0/16', '--block-size', '29'],
    ['node', 'create', 'mig-a', '--label', 'rack=a'],
    ['node', 'create', 'mig-b', '--label', 'rack=a'],
    ['node', 'create', 'mig-gone'],
  ])
    ok(t, ctl(etcd, ...args));
  const etcdStore = await openStore(etcd.netconf);
  t.teardown(() => etcdStore.close());
  await ensureClusterInfo(etcdStore, NETPLUG_VERSION, 'k8s');

  const onEtcd = (node: string) => ({
    cniVersion: '1.1.0',
    name: NETWORK,
    type: 'netplug',
    nodename: node,
    ...etcd.netconf,
    kubernetes: { kubeconfig: pluginKubeconfig },
    policy: { type: 'k8s' },
    ipam: { type: 'netplug-ipam' },
  });
  const onKubernetes = (node: string) => ({
    cniVersion: '1.1.0',
    name: NETWORK,
    type: 'netplug',
    nodename: node,
    datastore_type: 'kubernetes',
    kubernetes: { kubeconfig: pluginKubeconfig },
    policy: { type: 'k8s' },
    ipam: { type: 'netplug-ipam' },
  });
  let made = 0;
  const newContainer = async (node: string): Promise<Container> => {
    const pod = await createPod(kube, { namespace: `migrate-${process.pid}`, name: `pod-${made++}` });
    const id = containerId();
    return { id, netns: createNetns(t, 'mig').path, node, args: podArgs(pod, id) };
  };
  const cni = (command: string, c: Container, netconf: (node: string) => unknown) =>
    invoke({ command, containerId: c.id, netns: c.netns, args: c.args, netconf: netconf(c.node) });
  const add = (c: Container, netconf: (node: string) => unknown) => {
    const run = cni('ADD', c, netconf);
    t.is(run.status, 0, run.stdout + run.stderr);
    c.address = addressesOf(run.json)[0];
    return c;
  };

  // Six containers on etcd, three per node.
  const running: Container[] = [];
  for (let i = 0; i < 6; i++) running.push(add(await newContainer(NODES[i % 2] as string), onEtcd));
  t.is(new Set(running.map((c) => c.address)).size, 6);
  t.is(totalAllocated(t, etcd), 6);

  // Export refuses an unlocked datastore, and writes no file.
  const exportFile = join(dir, 'netplug-export.yaml');
  refusedWith(
    t,
    ctl(etcd, 'datastore', 'migrate', 'export', '-f', exportFile),
    /is not locked: run netplugctl datastore migrate lock first/,
  );
  t.false(existsSync(exportFile));

  // Lock: ADD refused with code 11 and how to unlock; nothing allocated. Idempotent.
  t.regex(ok(t, ctl(etcd, 'datastore', 'migrate', 'lock')).stdout, /^etcd at .* locked: ClusterInformation "default" datastoreReady false/);
  t.regex(ok(t, ctl(etcd, 'datastore', 'migrate', 'lock')).stdout, /is already locked/);
  const refused = cni('ADD', await newContainer('mig-a'), onEtcd);
  t.is(refused.status, 1);
  t.is(refused.json?.code, 11);
  t.regex(refused.json?.msg ?? '', /the datastore is locked for a migration .*netplugctl datastore migrate unlock/);
  t.is(totalAllocated(t, etcd), 6);

  // DEL still works while locked, and frees the address.
  const gone = running.shift() as Container;
  const del = cni('DEL', gone, onEtcd);
  t.is(del.status, 0, del.stdout + del.stderr);
  t.is(totalAllocated(t, etcd), 5);
  t.false(ok(t, ctl(etcd, 'ipam', 'show', '--ip', gone.address as string, '-o', 'json')).json.allocated);

  // Export: one document with the sections, the source locked.
  t.regex(
    ok(t, ctl(etcd, 'datastore', 'migrate', 'export', '-f', exportFile)).stdout,
    /^exported 1 ClusterInformation, 3 nodes, \d+ blocks, 5 handles, \d+ block affinities, 5 workload endpoints, 0 pending requests, 1 pools from etcd at .* to .*netplug-export\.yaml\n$/,
  );
  const exported = load(readFileSync(exportFile, 'utf8')) as {
    kind: string;
    metadata: { locked: boolean };
    sections: Record<string, { key: string; value: any }[]>;
  };
  t.is(exported.kind, 'DatastoreExport');
  t.true(exported.metadata.locked);
  t.false(exported.sections['clusterInformation']?.[0]?.value.spec.datastoreReady);
  t.deepEqual(exported.sections['handles']?.map((h) => h.key.split('/').pop()).sort(), running.map((c) => `${NETWORK}.${c.id}`).sort());

  // Refusals of import, each writing nothing: a file that is not an export, a target with other IPAM data.
  const notExport = join(dir, 'pod.json');
  writeFileSync(notExport, JSON.stringify({ apiVersion: 'v1', kind: 'Pod' }));
  refusedWith(
    t,
    kctl('datastore', 'migrate', 'import', '-f', notExport),
    /pod\.json: it is not a netplugctl datastore export \(kind "Pod"/,
  );
  const broken = join(dir, 'broken.yaml');
  writeFileSync(broken, readFileSync(exportFile, 'utf8').replace('kind: DatastoreExport', 'kind: DatastoreExport\nsections: ['));
  refusedWith(t, kctl('datastore', 'migrate', 'import', '-f', broken), /broken\.yaml: it is neither JSON nor YAML/);
  const wrongKey = join(dir, 'wrong-key.json');
  const tampered = structuredClone(exported);
  (tampered.sections['pools']?.[0] as { key: string }).key = '/netplug/resources/v3/projectnet.org/hostendpoints/x';
  writeFileSync(wrongKey, JSON.stringify(tampered));
  refusedWith(t, kctl('datastore', 'migrate', 'import', '-f', wrongKey), /field "sections\.pools\.0\.key": .* is not a key of pools/);
  ok(t, kctl('pool', 'create', 'other', '--cidr', '10.182.0.0/16'));
  refusedWith(
    t,
    kctl('datastore', 'migrate', 'import', '-f', exportFile),
    /already holds netplug IPAM data that is not this export's \(1 documents, such as \/netplug\/resources\/v3\/projectnet\.org\/ippools\/other\): import only into a datastore without netplug IPAM data/,
  );
  t.deepEqual(await objectNames(kube, 'clusterinformations'), [], 'nothing written');
  t.deepEqual(await objectNames(kube, 'ipamblocks'), []);
  ok(t, kctl('pool', 'delete', 'other'));

  // Import: written locked; the node Kubernetes does not have is named. A second run is safe.
  const imported = ok(t, kctl('datastore', 'migrate', 'import', '-f', exportFile)).stdout;
  t.regex(
    imported,
    /^imported \d+ blocks, 5 handles, \d+ block affinities, 5 workload endpoints, 0 pending requests, 1 pools into the Kubernetes API at /,
  );
  t.regex(imported, /nodes without a Kubernetes Node .*: mig-gone\n/);
  t.regex(imported, /the Kubernetes datastore is locked/);
  t.regex(
    ok(t, kctl('datastore', 'migrate', 'import', '-f', exportFile)).stdout,
    /^imported 0 blocks, 0 handles, .*0 pools .*\(\d+ documents were there already/,
  );
  t.deepEqual((await objectNames(kube, 'workloadendpoints')).length, 5);

  // Switched to the Kubernetes datastore, still locked: ADD refused there too.
  const early = cni('ADD', await newContainer('mig-b'), onKubernetes);
  t.is(early.json?.code, 11, early.stdout);
  t.regex(ok(t, kctl('datastore', 'migrate', 'unlock')).stdout, /unlocked: ClusterInformation "default" datastoreReady true/);
  t.regex(ok(t, kctl('datastore', 'migrate', 'unlock')).stdout, /is not locked/);

  // The running containers' addresses are theirs on the Kubernetes datastore.
  for (const c of running) {
    const shown = ok(t, kctl('ipam', 'show', '--ip', c.address as string, '-o', 'json')).json;
    t.like(shown, { allocated: true, handle: `${NETWORK}.${c.id}`, node: c.node, workloadEndpointExists: true });
  }
  // New containers get addresses none of them holds.
  const fresh: Container[] = [];
  for (let i = 0; i < 4; i++) fresh.push(add(await newContainer(NODES[i % 2] as string), onKubernetes));
  const held = new Set(running.map((c) => c.address));
  t.deepEqual(
    fresh.filter((c) => held.has(c.address)),
    [],
  );
  t.is(new Set(fresh.map((c) => c.address)).size, 4);
  // A migrated container's DEL releases its address in the Kubernetes datastore.
  const migrated = running.shift() as Container;
  t.is(cni('DEL', migrated, onKubernetes).status, 0);
  t.false(ok(t, kctl('ipam', 'show', '--ip', migrated.address as string, '-o', 'json')).json.allocated);
  t.regex(ok(t, kctl('ipam', 'check')).stdout, /no problems found\n$/);

  for (const c of [...running, ...fresh]) t.is(cni('DEL', c, onKubernetes).status, 0);
  t.deepEqual(await objectNames(kube, 'ipamhandles'), []);
});

/** netplugctl on the Kubernetes datastore as the cluster administrator (its datastore flag first, as an administrator types it). */
function kubeCtl(kube: Kube, ...args: string[]) {
  const run = spawnSync(NETPLUGCTL, ['--kubeconfig', kube.server.admin.kubeconfig, ...args], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin' },
    timeout: 120_000,
  });
  let json: unknown;
  try {
    json = args.includes('json') ? JSON.parse(run.stdout) : undefined;
  } catch {
    json = undefined;
  }
  return { status: run.status, stdout: run.stdout, stderr: run.stderr, json: json as any };
}

function ok<R extends { status: number | null; stdout: string; stderr: string }>(t: ExecutionContext, run: R): R {
  if (run.status !== 0) t.fail(`netplugctl exited ${run.status}: ${run.stderr}${run.stdout}`);
  return run;
}

async function objectNames(kube: Kube, plural: string): Promise<string[]> {
  const config = kube.config;
  const list = (await config
    .makeApiClient(k8s.CustomObjectsApi)
    .listClusterCustomObject({ group: 'crd.projectnet.org', version: 'v1', plural })) as {
    items: { metadata: { name: string } }[];
  };
  return list.items.map((o) => o.metadata.name).sort();
}

test('while locked: host-local with workload endpoints in etcd and netplug-ipam run as an IPAM plugin are refused too; CHECK and DEL go on', async (t) => {
  const etcd = await startEtcd(t);
  ok(t, ctl(etcd, 'pool', 'create', 'lk', '--cidr', '10.183.0.0/16', '--block-size', '29'));
  const hostLocal = hostLocalNetconf({ version: '1.1.0', dataDir: tempDir(t, 'hl'), subnet: '10.184.0.0/24', extra: { ...etcd.netconf } });
  const first = { containerId: containerId(), netns: createNetns(t, 'lk').path, netconf: hostLocal };
  const firstAdd = invoke({ ...first, command: 'ADD' });
  t.is(firstAdd.status, 0, firstAdd.stdout);

  // --allow-unlocked: exported anyway, to stdout as JSON, and marked so.
  const unlocked = JSON.parse(ok(t, ctl(etcd, 'datastore', 'migrate', 'export', '--allow-unlocked')).stdout);
  t.like(unlocked, { kind: 'DatastoreExport', metadata: { locked: false } });
  t.is(unlocked.sections.workloadEndpoints.length, 1);
  t.is(unlocked.sections.pools.length, 1);
  const usage = ctl(etcd, 'datastore', 'migrate', 'lock', '-f', 'x');
  t.is(usage.status, 2);
  t.is(usage.stderr, 'netplugctl: datastore migrate lock does not take --file\n');

  t.regex(ok(t, ctl(etcd, 'datastore', 'migrate', 'lock')).stdout, /locked/);
  const second = { containerId: containerId(), netns: createNetns(t, 'lk').path, netconf: hostLocal };
  const refusedHostLocal = invoke({ ...second, command: 'ADD' });
  t.is(refusedHostLocal.json?.code, 11, refusedHostLocal.stdout);
  t.regex(refusedHostLocal.json?.msg, /locked for a migration/);
  const ipamConf = {
    cniVersion: '1.1.0',
    name: 'lk-ipam',
    type: 'ptp',
    nodename: 'lk-node',
    ...etcd.netconf,
    ipam: { type: 'netplug-ipam' },
  };
  const refusedIpam = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: second.netns,
    netconf: ipamConf,
    executable: NETPLUG_IPAM,
  });
  t.is(refusedIpam.json?.code, 11, refusedIpam.stdout);
  t.is(totalAllocated(t, etcd), 0);

  const check = invoke({ ...first, command: 'CHECK', netconf: { ...hostLocal, prevResult: firstAdd.json } });
  t.is(check.status, 0, check.stdout);
  t.is(invoke({ ...first, command: 'DEL' }).status, 0);
  t.regex(ok(t, ctl(etcd, 'datastore', 'migrate', 'unlock')).stdout, /unlocked/);
  t.is(invoke({ ...second, command: 'ADD' }).status, 0);
  t.is(invoke({ ...second, command: 'DEL' }).status, 0);
});
