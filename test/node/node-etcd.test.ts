// netplug-node on the etcd datastore, against a real etcd and a real kube-apiserver, with exactly
// the Kubernetes permissions the manifest's ClusterRole gives it: the files the plugin reads,
// ClusterInformation (created, then brought to this release), the default pool (from kubeadm's
// pod CIDR, or NETPLUG_IPV4POOL_CIDR; never beside an existing pool), the node registered with
// its Kubernetes labels and following their changes, and readiness following etcd.
import test, { type ExecutionContext } from 'ava';

import { FALLBACK_MTU, defaultRouteMtu } from '../../ts/config/mtu.ts';
import { CLUSTER_INFO_KEY } from '../../ts/model/cluster-information.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { ctlOk } from '../helpers/ipam.ts';
import { startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import { NODE_AGENT_RULES, probe, readVarFile, ready, startAgent } from './agent.ts';

let kube: Kube;
let agentKubeconfig: string;
const shared = sharedTeardowns(test);

test.before(async () => {
  kube = await startKube(shared);
  agentKubeconfig = (await kube.identityWith('netplug-node-etcd', NODE_AGENT_RULES)).kubeconfig;
  await kube.core.createNamespace({ body: { metadata: { name: 'kube-system' } } }).catch(() => undefined);
  await kube.core.createNamespacedConfigMap({
    namespace: 'kube-system',
    body: {
      metadata: { name: 'kubeadm-config' },
      data: {
        ClusterConfiguration:
          'apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nnetworking:\n  podSubnet: fd00:10::/56,10.200.0.0/16\n  serviceSubnet: 10.96.0.0/12\n',
      },
    },
  });
});

async function etcdStore(t: ExecutionContext, etcd: EtcdServer): Promise<Store> {
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  return store;
}

const etcdEnv = (etcd: EtcdServer, node: string, extra: Record<string, string> = {}) => ({
  NODENAME: node,
  DATASTORE_TYPE: 'etcdv3',
  ETCD_ENDPOINTS: etcd.endpoints,
  CLUSTER_TYPE: 'k8s,bgp',
  KUBECONFIG: agentKubeconfig,
  ...extra,
});

/** What this process writes to stderr while `work` runs (the agents here log there), passed on as well. */
async function stderrDuring(work: () => Promise<unknown>): Promise<string> {
  let text = '';
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    text += String(chunk);
    return write.call(process.stderr, chunk, ...rest);
  }) as typeof process.stderr.write;
  try {
    await work();
  } finally {
    process.stderr.write = write;
  }
  return text;
}

test('a fresh cluster: files, ClusterInformation, the default pool from kubeadm, the node and its labels; readiness follows etcd', async (t) => {
  const etcd = await startEtcd(t);
  await kube.core.createNode({ body: { metadata: { name: 'node-e1', labels: { zone: 'a' } } } });
  t.teardown(() => kube.core.deleteNode({ name: 'node-e1' }));
  // client-node ends a watch that heard nothing for 30 s; 3 s here, so the quiet spell below is short.
  const agent = await startAgent(t, etcdEnv(etcd, 'node-e1', { NETPLUG_IPV4POOL_BLOCK_SIZE: '24' }), { watchTimeoutMs: 3_000 });
  await ready(agent);

  t.is(readVarFile(agent, 'nodename'), 'node-e1');
  // The underlay's: this agent programs no routes (NETPLUG_NETWORKING_BACKEND=none), so no
  // encapsulation of its own (routes.test.ts sees the VXLAN pool's MTU).
  t.is(readVarFile(agent, 'mtu'), String(defaultRouteMtu() ?? FALLBACK_MTU));
  t.is((await probe(agent, '/livez')).status, 200);
  // The path the netconf's readiness_gates name answers as /readyz.
  t.deepEqual(await probe(agent, '/readiness'), { status: 200, text: 'ok\n' });

  t.is(
    ctlOk(t, etcd, 'version').stdout,
    `Client Version:    ${NETPLUG_VERSION}\nCluster Version:   ${NETPLUG_VERSION}\nCluster Type:      k8s,bgp\n\nNODE     VERSION\nnode-e1  ${NETPLUG_VERSION}\n`,
  );
  const guid = (await (await etcdStore(t, etcd)).get<{ spec: { clusterGUID: string; datastoreReady: boolean } }>(CLUSTER_INFO_KEY))?.value
    .spec ?? { clusterGUID: '', datastoreReady: false };
  t.regex(guid.clusterGUID, /^[0-9a-f]{32}$/);
  t.true(guid.datastoreReady);

  t.deepEqual(ctlOk(t, etcd, 'pool', 'list', '-o', 'json').json, {
    pools: [
      {
        name: 'default-ipv4-ippool',
        cidr: '10.200.0.0/16',
        blockSize: 24,
        nodeSelector: 'all()',
        ipipMode: 'Never',
        vxlanMode: 'CrossSubnet',
        natOutgoing: true,
        disabled: false,
      },
    ],
  });
  const nodes = () =>
    (ctlOk(t, etcd, 'node', 'list', '-o', 'json').json as { nodes: { name: string; labels: Record<string, string> }[] }).nodes;
  t.deepEqual(nodes(), [{ name: 'node-e1', labels: { zone: 'a' } }]);

  // A label changed on the Kubernetes Node reaches the etcd Node, which pool node selectors match.
  const node = await kube.core.readNode({ name: 'node-e1' });
  await kube.core.replaceNode({ name: 'node-e1', body: { ...node, metadata: { ...node.metadata, labels: { zone: 'b', rack: '7' } } } });
  await eventually('the etcd Node has the new labels', () => {
    const labels = nodes()[0]?.labels ?? {};
    return labels['zone'] === 'b' && labels['rack'] === '7' && Object.keys(labels).length === 2;
  });

  // Quiet for longer than the watch hears nothing before ending it (twice over): the Node is
  // watched again from where it was, without a warning, and a change after that still arrives.
  const logged = await stderrDuring(() => new Promise((resolve) => setTimeout(resolve, 7_000)));
  t.false(/ WARNING .*Kubernetes Node "node-e1"/.test(logged), logged);
  const quiet = await kube.core.readNode({ name: 'node-e1' });
  await kube.core.replaceNode({ name: 'node-e1', body: { ...quiet, metadata: { ...quiet.metadata, labels: { zone: 'c' } } } });
  await eventually('the etcd Node has the labels changed after the quiet spell', () => nodes()[0]?.labels['zone'] === 'c');

  // etcd gone: not ready (alive still); etcd back: ready again.
  await etcd.stop();
  await eventually('readiness is 503 while etcd is down', async () => (await probe(agent, '/readyz')).status === 503);
  t.regex((await probe(agent, '/readyz')).text, /^\[-\]datastore failed: etcd at http:\/\/127\.0\.0\.1:\d+ does not answer/m);
  t.is((await probe(agent, '/readiness')).status, 503);
  t.is((await probe(agent, '/livez')).status, 200);
  await etcd.start();
  await ready(agent);

  t.is(await agent.stop(), 0);
  t.is((await probe(agent, '/livez')).status, 0, 'the health server is closed');
});

test('an older ClusterInformation is brought to this release, cluster types unioned; an existing pool means no default pool', async (t) => {
  const etcd = await startEtcd(t);
  const store = await etcdStore(t, etcd);
  await store.commit([
    {
      key: CLUSTER_INFO_KEY,
      create: {
        kind: 'ClusterInformation',
        apiVersion: 'projectnet.org/v3',
        metadata: { name: 'default' },
        spec: { clusterGUID: 'f00dfeed', clusterType: 'k8s,bgp', netplugVersion: 'v3.30.2' },
      },
    },
  ]);
  ctlOk(t, etcd, 'pool', 'create', 'mine', '--cidr', '10.77.0.0/16');
  const agent = await startAgent(t, etcdEnv(etcd, 'node-e2', { CLUSTER_TYPE: 'k8s,typha' }));
  await ready(agent);
  t.deepEqual((await store.get<{ spec: unknown }>(CLUSTER_INFO_KEY))?.value.spec, {
    clusterGUID: 'f00dfeed',
    clusterType: 'k8s,bgp,typha',
    netplugVersion: NETPLUG_VERSION,
    datastoreReady: true,
    variant: 'netplug',
  });
  t.deepEqual(
    (ctlOk(t, etcd, 'pool', 'list', '-o', 'json').json as { pools: { name: string }[] }).pools.map((p) => p.name),
    ['mine'],
  );
  // The Kubernetes Node does not exist: the node is registered without labels all the same.
  t.deepEqual(ctlOk(t, etcd, 'node', 'list', '-o', 'json').json, { nodes: [{ name: 'node-e2', labels: {} }] });
  t.is(await agent.stop(), 0);
});

test('NETPLUG_IPV4POOL_CIDR wins over kubeadm; the pool is created once; NO_DEFAULT_POOLS creates none', async (t) => {
  const etcd = await startEtcd(t);
  const first = await startAgent(t, etcdEnv(etcd, 'node-e3', { NETPLUG_IPV4POOL_CIDR: '10.123.0.0/20' }));
  await ready(first);
  const pools = () =>
    (ctlOk(t, etcd, 'pool', 'list', '-o', 'json').json as { pools: { name: string; cidr: string; blockSize: number }[] }).pools;
  t.deepEqual(
    pools().map(({ name, cidr, blockSize }) => ({ name, cidr, blockSize })),
    [{ name: 'default-ipv4-ippool', cidr: '10.123.0.0/20', blockSize: 26 }],
  );
  t.is(await first.stop(), 0);
  // Restarted (an upgrade, a new node) with another CIDR: the pool stays as it is.
  const again = await startAgent(t, etcdEnv(etcd, 'node-e3', { NETPLUG_IPV4POOL_CIDR: '10.124.0.0/16' }));
  await ready(again);
  t.deepEqual(
    pools().map((p) => p.cidr),
    ['10.123.0.0/20'],
  );
  t.is(await again.stop(), 0);

  const bare = await startEtcd(t);
  const none = await startAgent(t, etcdEnv(bare, 'node-e4', { NO_DEFAULT_POOLS: 'true' }));
  await ready(none);
  t.deepEqual(ctlOk(t, bare, 'pool', 'list', '-o', 'json').json, { pools: [] });
  t.is(await none.stop(), 0);
});

test('bad settings stop the agent before it writes anything', async (t) => {
  const settings: Record<string, string>[] = [
    { NODENAME: 'Not_A_Node' },
    { NODENAME: 'node-x', DATASTORE_TYPE: 'consul' },
    { NODENAME: 'node-x', NETPLUG_IPV4POOL_CIDR: '10.0.0.0/33' },
    { NODENAME: 'node-x', NETPLUG_IPV4POOL_BLOCK_SIZE: '8' },
    { NODENAME: 'node-x', NETPLUG_HEALTH_ADDR: 'localhost' },
  ];
  for (const env of settings) {
    const agent = await startAgent(t, env);
    t.is(await agent.stop(), 1, JSON.stringify(env));
    t.throws(() => readVarFile(agent, 'nodename'), { code: 'ENOENT' });
  }
});

test('etcd with mutual TLS: ETCD_ENDPOINTS, ETCD_CA_CERT_FILE, ETCD_CERT_FILE, ETCD_KEY_FILE', async (t) => {
  const etcd = await startEtcd(t, { tls: true });
  const { etcd_ca_cert_file, etcd_cert_file, etcd_key_file } = etcd.netconf;
  const agent = await startAgent(
    t,
    etcdEnv(etcd, 'node-e5', {
      ETCD_CA_CERT_FILE: etcd_ca_cert_file ?? '',
      ETCD_CERT_FILE: etcd_cert_file ?? '',
      ETCD_KEY_FILE: etcd_key_file ?? '',
    }),
  );
  await ready(agent);
  t.regex(ctlOk(t, etcd, 'version').stdout, /^Cluster Version: {3}v3\.31\.\d+$/m);
  t.is(await agent.stop(), 0);
});
