// The Kubernetes datastore (datastore_type "kubernetes") against a real kube-apiserver: netplug's
// custom resources installed from deploy/crds/, pools managed with netplugctl --kubeconfig, pool
// node selectors matched against the cluster's Node labels, 50 concurrent ADDs on 5 nodes with
// no address twice and nothing left after DEL, and an identity short of the datastore
// permissions told which one it lacks, and plugin processes killed mid-ADD leaving nothing DEL
// cannot clean (the API server has no transactions: the order of the writes is what keeps it so).
import { spawnSync } from 'node:child_process';

import test from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { invoke } from '../helpers/cni.ts';
import { addressesOf, invokeAsync, NETPLUGCTL, startInvocation } from '../helpers/ipam.ts';
import { containerId, createNetns } from '../helpers/kernel.ts';
import {
  createPod,
  DATASTORE_RULES,
  installCrds,
  PLUGIN_RULES,
  podArgs,
  startKube,
  type Kube,
  removeIpamLockFileAfter,
} from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

let kube: Kube;
let custom: k8s.CustomObjectsApi;
let pluginKubeconfig: string;
const shared = sharedTeardowns(test);
const NODES = ['kdd-0', 'kdd-1', 'kdd-2', 'kdd-3', 'kdd-4'];
const rackOf = (node: string) => (Number(node.slice(-1)) < 3 ? 'a' : 'b');

/** netplugctl on the Kubernetes datastore, as the cluster administrator. */
function kctl(...args: string[]) {
  const run = spawnSync(NETPLUGCTL, ['--kubeconfig', kube.server.admin.kubeconfig, ...args], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin' },
    timeout: 60_000,
  });
  return {
    status: run.status,
    stdout: run.stdout,
    stderr: run.stderr,
    json: args.includes('json') ? JSON.parse(run.stdout || 'null') : undefined,
  };
}

test.before(async (t) => {
  removeIpamLockFileAfter(shared);
  kube = await startKube(shared);
  await installCrds(kube);
  custom = kube.custom;
  pluginKubeconfig = (await kube.identityWith('netplug-cni-kdd', [...PLUGIN_RULES, ...DATASTORE_RULES])).kubeconfig;
  for (const name of NODES) await kube.core.createNode({ body: { metadata: { name, labels: { rack: rackOf(name) } } } });
  for (const args of [
    ['pool', 'create', 'rack-a', '--cidr', '10.170.0.0/16', '--block-size', '29', '--node-selector', 'rack == "a"'],
    ['pool', 'create', 'rack-b', '--cidr', '10.171.0.0/16', '--block-size', '29', '--node-selector', 'rack == "b"'],
    ['pool', 'create', 'v6', '--cidr', 'fd70::/48'],
  ]) {
    const run = kctl(...args);
    t.is(run.status, 0, run.stderr);
  }
});

function kddNetconf(node: string, kubeconfig = pluginKubeconfig, ipam: Record<string, unknown> = {}) {
  return {
    cniVersion: '1.1.0',
    name: 'kdd',
    type: 'netplug',
    nodename: node,
    datastore_type: 'kubernetes',
    kubernetes: { kubeconfig },
    policy: { type: 'k8s' },
    ipam: { type: 'netplug-ipam', ...ipam },
  };
}

const objects = async (plural: string) =>
  (
    (await custom.listClusterCustomObject({ group: 'crd.projectnet.org', version: 'v1', plural })) as {
      items: { metadata: k8s.V1ObjectMeta; spec: any }[];
    }
  ).items;

test.serial("netplugctl --kubeconfig keeps pools as custom resources; nodes are the cluster's Node objects", async (t) => {
  const pools = kctl('pool', 'list', '-o', 'json');
  t.is(pools.status, 0, pools.stderr);
  t.deepEqual(pools.json.pools.map((p: { name: string }) => p.name).sort(), ['rack-a', 'rack-b', 'v6']);
  const stored = (await objects('ippools')).find((o) => o.metadata.name === 'rack-a');
  t.like(stored?.spec, { kind: 'IPPool', spec: { cidr: '10.170.0.0/16', blockSize: 29, nodeSelector: 'rack == "a"' } });
  t.is(stored?.metadata.annotations?.['projectnet.org/key'], '/netplug/resources/v3/projectnet.org/ippools/rack-a');

  const nodes = kctl('node', 'list', '-o', 'json');
  t.is(nodes.status, 0, nodes.stderr);
  t.deepEqual(
    nodes.json.nodes.filter((n: { name: string }) => n.name.startsWith('kdd-')),
    NODES.map((name) => ({ name, labels: { rack: rackOf(name) } })),
  );
  const create = kctl('node', 'create', 'kdd-9', '--label', 'rack=a');
  t.is(create.status, 1);
  t.is(
    create.stderr,
    "netplugctl: in the Kubernetes datastore the nodes are the cluster's Node objects; label them with kubectl label node kdd-9 key=value\n",
  );
  const dup = kctl('pool', 'create', 'rack-a', '--cidr', '10.172.0.0/16');
  t.is(dup.status, 1);
  t.regex(dup.stderr, /pool "rack-a" already exists/);
});

test.serial(
  "50 concurrent ADDs on 5 nodes: distinct addresses from the pools the Nodes' labels select; nothing left after DEL",
  async (t) => {
    t.timeout(8 * 60_000);
    const pods = [];
    for (let i = 0; i < 50; i++) {
      const node = NODES[i % NODES.length] as string;
      const pod = await createPod(kube, {
        namespace: `kdd-${process.pid}`,
        name: `burst-${i}`,
        labels: { app: 'burst', index: String(i) },
      });
      const id = containerId();
      pods.push({
        node,
        pod,
        call: { containerId: id, netns: createNetns(t, 'kdd').path, netconf: kddNetconf(node), args: podArgs(pod, id) },
      });
    }
    const adds = await Promise.all(pods.map((p) => invokeAsync({ ...p.call, command: 'ADD' })));
    t.deepEqual(
      adds.filter((a) => a.status !== 0).map((a) => a.stdout),
      [],
    );
    const addresses = adds.map((a) => addressesOf(a.json)[0] ?? '');
    t.is(new Set(addresses).size, 50, 'no address handed out twice');
    for (const [i, p] of pods.entries())
      t.true(addresses[i]?.startsWith(rackOf(p.node) === 'a' ? '10.170.' : '10.171.'), `${p.node}: ${addresses[i]}`);

    const shown = kctl('ipam', 'show', '-o', 'json');
    t.deepEqual(Object.fromEntries(shown.json.pools.map((p: { name: string; allocated: number }) => [p.name, p.allocated])), {
      'rack-a': 30,
      'rack-b': 20,
      v6: 0,
    });
    const check = kctl('ipam', 'check', '--grace-period', '0');
    t.is(check.status, 0, check.stdout + check.stderr);
    const blocks = await objects('ipamblocks');
    t.deepEqual(
      [...new Set(blocks.map((b) => b.spec.affinity))].sort(),
      NODES.map((n) => `host:${n}`),
      'every node claimed blocks of its own',
    );
    t.true(
      blocks.every((b) => /^10\.17[01]\.\d+\.\d+-29$/.test(b.metadata.name ?? '')),
      'blocks are named after their CIDR',
    );
    const endpoints = await objects('workloadendpoints');
    const first = endpoints.find((e) => e.spec.spec.pod === 'burst-0');
    t.like(first?.spec.metadata.labels, { app: 'burst', index: '0', 'projectnet.org/namespace': `kdd-${process.pid}` });
    t.deepEqual(first?.spec.spec.ipNetworks, [`${addresses[0]}/32`]);

    const dels = await Promise.all(pods.map((p) => invokeAsync({ ...p.call, command: 'DEL' })));
    t.deepEqual(
      dels.map((d) => d.status),
      pods.map(() => 0),
    );
    t.deepEqual(
      kctl('ipam', 'show', '-o', 'json').json.pools.map((p: { allocated: number }) => p.allocated),
      [0, 0, 0],
    );
    t.deepEqual(await objects('ipamhandles'), []);
    t.deepEqual(await objects('ipampendingrequests'), [], 'no pending request left behind');
    t.deepEqual(
      (await objects('workloadendpoints')).filter((e) => e.spec.metadata.namespace === `kdd-${process.pid}`),
      [],
    );
    t.is(kctl('ipam', 'check', '--grace-period', '0').status, 0);
  },
);

test.serial('dual-stack ADDs SIGKILLed at random points leave nothing DEL cannot clean', async (t) => {
  t.timeout(5 * 60_000);
  const namespace = `kill-${process.pid}`;
  const pods = [];
  for (let i = 0; i < 24; i++) {
    const pod = await createPod(kube, { namespace, name: `killed-${i}` });
    const id = containerId();
    const node = NODES[i % NODES.length] as string;
    pods.push({
      containerId: id,
      netns: createNetns(t, 'kddkill').path,
      netconf: kddNetconf(node, pluginKubeconfig, { assign_ipv6: 'true' }),
      args: podArgs(pod, id),
    });
  }
  const outcomes = await Promise.all(
    pods.map(async (pod, i) => {
      const { child, outcome } = startInvocation({ ...pod, command: 'ADD' });
      // From before Node is up to after the last write: every stage gets hit somewhere.
      await new Promise((resolve) => setTimeout(resolve, i * 40));
      child.kill('SIGKILL');
      return outcome;
    }),
  );
  t.log(`${outcomes.filter((o) => o.status === 0).length} of ${pods.length} finished before the kill`);
  const dels = await Promise.all(pods.map((pod) => invokeAsync({ ...pod, command: 'DEL' })));
  t.deepEqual(
    dels.map((d) => d.status),
    pods.map(() => 0),
    dels.find((d) => d.status !== 0)?.stdout,
  );
  t.deepEqual(
    kctl('ipam', 'show', '-o', 'json').json.pools.map((p: { allocated: number }) => p.allocated),
    [0, 0, 0],
  );
  t.deepEqual(await objects('ipamhandles'), []);
  t.deepEqual(
    (await objects('workloadendpoints')).filter((e) => e.spec.metadata.namespace === namespace),
    [],
  );
  const check = kctl('ipam', 'check', '--grace-period', '0');
  t.is(check.status, 0, check.stdout + check.stderr);
});

test('a dual-stack pod: an IPv6 block under its hashed name, released by DEL', async (t) => {
  const pod = await createPod(kube, { labels: { app: 'dual' } });
  const id = containerId();
  const netns = createNetns(t, 'kdd6');
  const call = {
    containerId: id,
    netns: netns.path,
    netconf: kddNetconf('kdd-1', pluginKubeconfig, { assign_ipv6: 'true' }),
    args: podArgs(pod, id),
  };
  const add = invoke({ ...call, command: 'ADD' });
  t.is(add.status, 0, add.stdout);
  const [v4, v6] = addressesOf(add.json);
  t.regex(v4 ?? '', /^10\.170\./);
  t.regex(v6 ?? '', /^fd70:/);
  const block = (await objects('ipamblocks')).find((b) => b.spec.cidr.startsWith('fd70:'));
  t.regex(block?.metadata.name ?? '', /^fd70-.*-[0-9a-f]{16}$/);
  t.is(invoke({ ...call, command: 'DEL' }).status, 0);
  t.is(invoke({ ...call, command: 'DEL' }).status, 0, 'DEL is idempotent');
  t.false((await objects('ipamhandles')).some((h) => h.spec.handleID === `kdd.${id}`));
});

test('GC releases what attachments no longer listed hold, on this node and network only', async (t) => {
  const netconf = { ...kddNetconf('kdd-4'), name: 'kdd-gc' };
  const pods = [];
  for (let i = 0; i < 3; i++) {
    const pod = await createPod(kube, { labels: { app: 'gc' } });
    const id = containerId();
    pods.push({ containerId: id, netns: createNetns(t, 'kddgc').path, netconf, args: podArgs(pod, id) });
  }
  for (const pod of pods) t.is(invoke({ ...pod, command: 'ADD' }).status, 0);
  const [kept, ...gone] = pods as [(typeof pods)[0], ...typeof pods];
  const gc = invoke({
    command: 'GC',
    netconf: { ...netconf, 'cni.dev/valid-attachments': [{ containerID: kept.containerId, ifname: 'eth0' }] },
  });
  t.is(gc.status, 0, gc.stdout);
  const handles = (await objects('ipamhandles')).map((h) => h.spec.handleID);
  t.true(handles.includes(`kdd-gc.${kept.containerId}`));
  for (const pod of gone) t.false(handles.includes(`kdd-gc.${pod.containerId}`), 'released by GC');
  const endpoints = (await objects('workloadendpoints')).filter((e) => e.spec.metadata.labels['projectnet.org/network'] === 'kdd-gc');
  t.deepEqual(
    endpoints.map((e) => e.spec.spec.containerID),
    [kept.containerId],
  );
  for (const pod of pods) t.is(invoke({ ...pod, command: 'DEL' }).status, 0);
  t.false((await objects('ipamhandles')).some((h) => h.spec.handleID.startsWith('kdd-gc.')));
});

test("an identity without the datastore's permissions: a clear error naming the one it lacks, nothing allocated", async (t) => {
  const identity = await kube.identityWith('netplug-cni-no-datastore', PLUGIN_RULES);
  const pod = await createPod(kube);
  const id = containerId();
  const netns = createNetns(t, 'kddperm');
  const add = invoke({
    command: 'ADD',
    containerId: id,
    netns: netns.path,
    netconf: kddNetconf('kdd-2', identity.kubeconfig),
    args: podArgs(pod, id),
  });
  t.is(add.status, 1);
  t.is(add.json.code, 100);
  t.regex(add.json.msg, /refused: .*netplug-cni-no-datastore.*; netplug needs list on ippools\.crd\.projectnet\.org/);
  t.false((await objects('ipamhandles')).some((h) => h.spec.handleID === `kdd.${id}`));
});
