// netplug-node's /metrics and readiness, against a real etcd and a real kube-apiserver: the names
// and labels Prometheus scrapes, counts that move as the agent and the plugin work on the
// datastore, pool usage that follows real allocations, and readiness naming every reason.
import test, { type ExecutionContext } from 'ava';

import { CniMetrics } from '../../ts/node/cni/cni-metrics.ts';
import { observePools } from '../../ts/node/pool-usage/observe-pools.ts';
import { PoolUsageMetrics } from '../../ts/node/pool-usage/pool-usage-metrics.ts';
import { followCluster, USAGE_PREFIXES } from '../../ts/node/shared/cluster-feed.ts';
import { countingStore } from '../../ts/node/shared/count-datastore.ts';
import { DatastoreMetrics } from '../../ts/node/shared/datastore-metrics.ts';
import { routesGauge } from '../../ts/node/shared/routes-gauge.ts';
import { HealthChecks } from '../../ts/runtime/health.ts';
import { serveHealth } from '../../ts/runtime/health-server.ts';
import { RuntimeMetrics } from '../../ts/runtime/metrics.ts';
import { openGrpcStore } from '../../ts/store/etcd/grpc.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { invoke } from '../helpers/cni.ts';
import { freePort, startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { containerId } from '../helpers/kernel.ts';
import { ctlOk, ipamNetconf, NETPLUG_IPAM } from '../helpers/ipam.ts';
import { startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import { NODE_AGENT_RULES, probe, ready, startAgent } from './agent.ts';

let kube: Kube;
let agentKubeconfig: string;
const shared = sharedTeardowns(test);

test.before(async () => {
  kube = await startKube(shared);
  agentKubeconfig = (await kube.identityWith('netplug-node-metrics', NODE_AGENT_RULES)).kubeconfig;
});

/** Each sample of `name` in the exposition text, as `{labels}` → value. */
function samples(text: string, name: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (match?.[1] === name) found.set(match[2] ?? '', Number(match[3]));
  }
  return found;
}

async function scrape(url: string): Promise<{ status: number; type: string; text: string }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  return { status: response.status, type: response.headers.get('content-type') ?? '', text: await response.text() };
}

async function etcdStore(t: ExecutionContext, etcd: EtcdServer): Promise<Store> {
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  return store;
}

test('the agent serves /metrics on its health server and its metrics address; datastore counts and errors move, pools appear, readiness names the reason', async (t) => {
  const etcd = await startEtcd(t);
  await kube.core.createNode({ body: { metadata: { name: 'node-m1' } } });
  t.teardown(() => kube.core.deleteNode({ name: 'node-m1' }));
  const metricsPort = await freePort();
  const agent = await startAgent(t, {
    NODENAME: 'node-m1',
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: agentKubeconfig,
    NETPLUG_IPV4POOL_CIDR: '10.210.0.0/16',
    NETPLUG_METRICS_ADDR: `127.0.0.1:${metricsPort}`,
  });
  await ready(agent);

  const health = await scrape(`${agent.health}/metrics`);
  t.is(health.status, 200);
  t.is(health.type, 'text/plain; version=0.0.4; charset=utf-8');
  for (const name of ['netplug_datastore_requests_total', 'netplug_datastore_request_errors_total', 'process_resident_memory_bytes'])
    t.regex(health.text, new RegExp(`^# TYPE ${name} `, 'm'));
  for (const name of ['netplug_cni_request_duration_seconds', 'netplug_ipam_allocations', 'netplug_routes'])
    t.regex(health.text, new RegExp(`^# HELP ${name} `, 'm'));
  // Start-up read ClusterInformation and the pools, and wrote them; none of it failed. (Pool usage
  // is counted from the agent's watch: test 'pool usage from the watch…' below.)
  const requests = samples(health.text, 'netplug_datastore_requests_total');
  for (const operation of ['get', 'listKeys', 'commit']) t.true((requests.get(`{operation="${operation}"}`) ?? 0) > 0, operation);
  t.true([...samples(health.text, 'netplug_datastore_request_errors_total').values()].every((n) => n === 0));

  // The default pool it made, observed once start-up is done: empty, 2^16 free.
  await eventually('the default pool is observed', async () =>
    samples((await scrape(`${agent.health}/metrics`)).text, 'netplug_ipam_allocations').has('{pool="default-ipv4-ippool"}'),
  );
  const pools = (await scrape(`${agent.health}/metrics`)).text;
  t.is(samples(pools, 'netplug_ipam_allocations').get('{pool="default-ipv4-ippool"}'), 0);
  t.is(samples(pools, 'netplug_ipam_free_addresses').get('{pool="default-ipv4-ippool"}'), 65536);

  // The metrics address serves /metrics only: the probes stay on the health address.
  const other = await scrape(`http://127.0.0.1:${metricsPort}/metrics`);
  t.is(other.status, 200);
  t.regex(other.text, /^netplug_datastore_requests_total\{operation="get"\} \d+$/m);
  for (const path of ['/readyz', '/readiness']) t.is((await scrape(`http://127.0.0.1:${metricsPort}${path}`)).status, 404, path);

  // The readiness check reads ClusterInformation every 10 s: the count moves.
  const gets = (text: string) => samples(text, 'netplug_datastore_requests_total').get('{operation="get"}') ?? 0;
  const before = gets((await scrape(`${agent.health}/metrics`)).text);
  await eventually('the get count moves', async () => gets((await scrape(`${agent.health}/metrics`)).text) > before);

  // etcd gone: readiness names it, and the failed reads are counted as errors.
  await etcd.stop();
  await eventually('readiness is 503 while etcd is down', async () => (await probe(agent, '/readyz')).status === 503);
  t.regex((await probe(agent, '/readyz')).text, /^\[-\]datastore failed: etcd at http:\/\/127\.0\.0\.1:\d+ does not answer/m);
  await eventually(
    'a failed get is counted',
    async () =>
      (samples((await scrape(`${agent.health}/metrics`)).text, 'netplug_datastore_request_errors_total').get('{operation="get"}') ?? 0) > 0,
  );
  await etcd.start();
  await ready(agent);
  t.is(await agent.stop(), 0);
  t.is((await probe(agent, '/metrics')).status, 0, 'the health server is closed');
  t.regex((await fetch(`http://127.0.0.1:${metricsPort}/metrics`).catch((err: Error) => err)).toString(), /fetch failed/);
});

test('pool usage follows real allocations, and a deleted pool is dropped; a lost compare-and-swap is a request, not an error', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'blue', '--cidr', '10.211.0.0/24', '--block-size', '28');
  ctlOk(t, etcd, 'pool', 'create', 'green', '--cidr', '10.212.0.0/24', '--block-size', '28');
  const metrics = new RuntimeMetrics();
  const store = countingStore(await etcdStore(t, etcd), new DatastoreMetrics(metrics.registry));
  const pools = new PoolUsageMetrics(metrics.registry);
  const netconf = ipamNetconf(etcd, { node: 'node-m2', ipam: { ipv4_pools: ['blue'] } });
  const ipam = (command: string, id: string) => {
    const outcome = invoke({ executable: NETPLUG_IPAM, command, containerId: id, netns: '/run/netns/netplug-ipam-only', netconf });
    t.is(outcome.status, 0, `${command}: ${outcome.stdout}${outcome.stderr}`);
  };
  const usage = async () => {
    await observePools(store, pools);
    const text = await metrics.text();
    return {
      allocations: Object.fromEntries(samples(text, 'netplug_ipam_allocations')),
      free: Object.fromEntries(samples(text, 'netplug_ipam_free_addresses')),
    };
  };

  t.deepEqual(await usage(), {
    allocations: { '{pool="blue"}': 0, '{pool="green"}': 0 },
    free: { '{pool="blue"}': 256, '{pool="green"}': 256 },
  });
  const [first, second] = [containerId(), containerId()];
  ipam('ADD', first);
  ipam('ADD', second);
  t.deepEqual(await usage(), {
    allocations: { '{pool="blue"}': 2, '{pool="green"}': 0 },
    free: { '{pool="blue"}': 254, '{pool="green"}': 256 },
  });
  ipam('DEL', first);
  t.like((await usage()).allocations, { '{pool="blue"}': 1 });
  ipam('DEL', second);
  ctlOk(t, etcd, 'pool', 'delete', 'green');
  t.deepEqual(await usage(), { allocations: { '{pool="blue"}': 0 }, free: { '{pool="blue"}': 256 } });

  // A commit whose condition no longer holds answered: counted, not an error.
  t.false(await store.commit([{ key: '/netplug/metrics-test', unchanged: '1' }]));
  const counts = async (name: string) => samples(await metrics.text(), name).get('{operation="commit"}');
  t.is(await counts('netplug_datastore_requests_total'), 1);
  t.is(await counts('netplug_datastore_request_errors_total'), 0);
  // An unreachable datastore is an error, and the error still reaches the caller.
  await etcd.stop();
  await t.throwsAsync(store.get('/netplug/metrics-test'));
  t.is(samples(await metrics.text(), 'netplug_datastore_request_errors_total').get('{operation="get"}'), 1);
  await etcd.start();
});

test('pool usage from the watch of blocks and pools, both families: real allocations counted with no datastore request; read while the watch is not in step', async (t) => {
  const etcd = await startEtcd(t);
  ctlOk(t, etcd, 'pool', 'create', 'four', '--cidr', '10.213.0.0/24', '--block-size', '28');
  ctlOk(t, etcd, 'pool', 'create', 'six', '--cidr', 'fd00:213::/112', '--block-size', '122');
  const metrics = new RuntimeMetrics();
  const pools = new PoolUsageMetrics(metrics.registry);
  const grpc = await openGrpcStore(etcd.netconf);
  t.teardown(() => grpc.close());
  const store = countingStore(grpc, new DatastoreMetrics(metrics.registry));
  const follow = store.follow;
  if (!follow) throw new Error('the gRPC store cannot follow');
  const feed = followCluster(follow, USAGE_PREFIXES);
  t.teardown(() => feed.stop());
  const netconf = ipamNetconf(etcd, { node: 'node-m3', ipam: { assign_ipv6: 'true', ipv4_pools: ['four'], ipv6_pools: ['six'] } });
  const add = () => {
    const outcome = invoke({
      executable: NETPLUG_IPAM,
      command: 'ADD',
      containerId: containerId(),
      netns: '/run/netns/netplug-ipam-only',
      netconf,
    });
    t.is(outcome.status, 0, `${outcome.stdout}${outcome.stderr}`);
  };
  const requests = async () => [...samples(await metrics.text(), 'netplug_datastore_requests_total').values()].reduce((a, b) => a + b, 0);
  const allocations = async () => Object.fromEntries(samples(await metrics.text(), 'netplug_ipam_allocations'));

  add();
  add();
  // The watch lists, then hears the allocations a moment after they commit; until it is in step
  // the agent reads (as it does here, before the first list).
  await eventually('both allocations of each family counted from the watch, with no request to etcd', async () => {
    const before = await requests();
    await observePools(store, pools, feed);
    const now = await allocations();
    return (await requests()) === before && now['{pool="four"}'] === 2 && now['{pool="six"}'] === 2;
  });
  t.deepEqual(await allocations(), { '{pool="four"}': 2, '{pool="six"}': 2 });
  t.is(Object.fromEntries(samples(await metrics.text(), 'netplug_ipam_free_addresses'))['{pool="four"}'], 254);
  const before = await requests();

  // A watch that is not in step (here: one never started) leaves the agent to read.
  const unstarted = followCluster(() => ({ stop: () => undefined }), USAGE_PREFIXES);
  await observePools(store, pools, unstarted);
  t.deepEqual(await allocations(), { '{pool="four"}': 2, '{pool="six"}': 2 });
  t.true((await requests()) > before, 'read from etcd');
});

test('readiness names every reason not to be ready, in order, on /readyz and /readiness; CNI latency by command and result', async (t) => {
  // The checks and the server as the agent has them (ts/node/main.ts): named checks of its
  // subsystems on the runtime's HealthChecks, /readiness answered as /readyz.
  const reasons: (string | undefined)[] = ['start-up work is not done yet', undefined, 'no route to node-b: its address is unknown'];
  const checks = new HealthChecks({
    log: { error: () => undefined, warning: () => undefined, info: () => undefined, debug: () => undefined },
  });
  for (const [i, name] of ['start-up', 'datastore', 'routes'].entries()) checks.add(name, () => reasons[i]);
  const metrics = new RuntimeMetrics();
  const cni = new CniMetrics(metrics.registry);
  const server = await serveHealth({ host: '127.0.0.1', port: 0 }, { checks, metrics, aliases: { '/readiness': '/readyz' } });
  t.teardown(() => server.close());
  const get = (path: string) => scrape(`http://127.0.0.1:${server.address.port}${path}`);

  for (const path of ['/readyz', '/readiness'])
    t.deepEqual(await get(path), {
      status: 503,
      type: 'text/plain; charset=utf-8',
      text: '[-]start-up failed: start-up work is not done yet\n[-]routes failed: no route to node-b: its address is unknown\nreadyz check failed\n',
    });
  reasons[0] = undefined;
  t.is((await get('/readyz')).text, '[-]routes failed: no route to node-b: its address is unknown\nreadyz check failed\n');
  reasons[2] = undefined;
  for (const path of ['/readyz', '/readiness'])
    t.deepEqual(await get(path), { status: 200, type: 'text/plain; charset=utf-8', text: 'ok\n' });
  t.is((await get('/nothing')).text, 'not found: /livez, /readyz, /metrics are served\n');

  cni.observeCni('ADD', 'success', 0.004);
  cni.observeCni('ADD', 'error', 12);
  cni.observeCni('DEL', 'success', 0.0005);
  routesGauge(metrics.registry).set({ kind: 'ipip' }, 3);
  const text = (await get('/metrics')).text;
  const histogram = samples(text, 'netplug_cni_request_duration_seconds_bucket');
  t.is(histogram.get('{le="0.001",command="ADD",result="success"}'), 0);
  t.is(histogram.get('{le="0.005",command="ADD",result="success"}'), 1);
  t.is(histogram.get('{le="10",command="ADD",result="error"}'), 0);
  t.is(histogram.get('{le="+Inf",command="ADD",result="error"}'), 1);
  t.is(histogram.get('{le="0.001",command="DEL",result="success"}'), 1);
  t.is(samples(text, 'netplug_cni_request_duration_seconds_count').get('{command="ADD",result="success"}'), 1);
  t.is(samples(text, 'netplug_routes').get('{kind="ipip"}'), 3);
});
