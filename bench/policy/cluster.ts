// The cluster bench/policy.ts runs against: a real kube-apiserver with its etcd (the Kubernetes
// datastore), an IP pool, two nodes (network namespaces reaching the API through relays,
// test/helpers/nodes.ts) each with its agent, one enforcing policy and one not; and the datastore
// filled to size through a bulk client.
import { readFileSync } from 'node:fs';
import { Agent as HttpsAgent, request } from 'node:https';
import { join } from 'node:path';

import * as k8s from '@kubernetes/client-node';

import { launchKubeApiserver, type KubeServer } from '../../scripts/lib/kube-server.ts';
import { installCrds } from '../../scripts/lib/netplug-crds.ts';
import { makeTopology, type TestNode } from '../../test/helpers/nodes.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { openStore } from '../../ts/store/open.ts';
import { Agent } from './agent.ts';
import { clusterPolicy, namespaceName, remotePod } from './objects.ts';
import { collector, log, ms, parallel, scratch } from './session.ts';
import { NAMESPACES, OFF, ON, PARALLEL, PODS, POLICIES } from './settings.ts';

type BulkClient = (method: string, path: string, body: unknown) => Promise<Record<string, unknown>>;

export interface Cluster {
  kube: KubeServer;
  /** The API server's admin credentials, for the bench's own watch (the peer of the agent's). */
  config: k8s.KubeConfig;
  core: k8s.CoreV1Api;
  networking: k8s.NetworkingV1Api;
  api: BulkClient;
  /** The node whose agent enforces policy (the one probed). */
  onNode: TestNode;
  agents: Record<'on' | 'off', Agent>;
}

/**
 * The API server's REST API as JSON over kept-alive TLS connections, for the bulk creations:
 * client-node opens a connection per request, which halves the rate on this machine.
 */
function bulkClient(kube: KubeServer): BulkClient {
  const agent = new HttpsAgent({
    keepAlive: true,
    maxSockets: PARALLEL,
    ca: readFileSync(kube.ca),
    cert: readFileSync(kube.admin.cert),
    key: readFileSync(kube.admin.key),
  });
  collector.teardown(() => agent.destroy());
  return (method, path, body) =>
    new Promise((resolve, reject) => {
      const sent = request(`${kube.url}${path}`, { method, agent, headers: { 'content-type': 'application/json' } }, (response) => {
        let text = '';
        response.setEncoding('utf8').on('data', (chunk: string) => {
          text += chunk;
        });
        response.on('end', () =>
          (response.statusCode ?? 0) < 300
            ? resolve(JSON.parse(text) as Record<string, unknown>)
            : reject(new Error(`${method} ${path}: ${response.statusCode} ${text.slice(0, 300)}`)),
        );
      });
      sent.on('error', reject);
      sent.end(JSON.stringify(body));
    });
}

/** The API server, the pool, the two nodes and their agents (not started). */
export async function startCluster(): Promise<Cluster> {
  const kube = await launchKubeApiserver(join(scratch, 'kube'));
  collector.teardown(() => kube.stop());
  await installCrds(kube.admin.kubeconfig);
  const config = new k8s.KubeConfig();
  config.loadFromFile(kube.admin.kubeconfig);
  const core = config.makeApiClient(k8s.CoreV1Api);
  const networking = config.makeApiClient(k8s.NetworkingV1Api);
  const api = bulkClient(kube);
  const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.admin.kubeconfig } });
  await store.commit([
    { key: keys.pool('bench-pods'), create: poolResource('bench-pods', { cidr: '10.78.0.0/16', 'block-size': '26' }, new Date()) },
  ]);
  await store.close();
  for (const name of [ON, OFF]) await core.createNode({ body: { metadata: { name, labels: { 'kubernetes.io/hostname': name } } } });

  const topology = await makeTopology(collector, {
    nodes: [
      { name: ON, subnet: 1 },
      { name: OFF, subnet: 1 },
    ],
    ports: [Number(new URL(kube.url).port)],
    datastoreNetconf: { datastore_type: 'kubernetes', kubernetes: { kubeconfig: kube.admin.kubeconfig } },
    agentEnv: {},
  });
  const [onNode, offNode] = topology.nodes as [TestNode, TestNode];
  const agentEnv = (node: TestNode, enforcement: boolean): Record<string, string> => ({
    PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
    NODENAME: node.name,
    DATASTORE_TYPE: 'kubernetes',
    KUBECONFIG: kube.admin.kubeconfig,
    NO_DEFAULT_POOLS: 'true',
    NETPLUG_NETWORKING_BACKEND: 'none',
    NETPLUG_POLICY_ENFORCEMENT: String(enforcement),
    NETPLUG_VAR_DIR: node.varDir,
    NETPLUG_AGENT_SOCKET: join(node.varDir, 'run', 'cni.sock'),
    NETPLUG_ENDPOINT_STATUS_PATH_PREFIX: join(node.varDir, 'run'),
    NETPLUG_HEALTH_ADDR: '127.0.0.1:9099',
    // As netplug's DaemonSet runs it (ts/render/node.ts).
    MALLOC_ARENA_MAX: '2',
  });
  const agents = { on: new Agent(onNode, agentEnv(onNode, true)), off: new Agent(offNode, agentEnv(offNode, false)) };
  return { kube, config, core, networking, api, onNode, agents };
}

/** Creates the NetworkPolicies numbered `from` up to (not including) `to`, PARALLEL at a time. */
export async function createPolicies(cluster: Cluster, from: number, to: number): Promise<void> {
  await parallel(
    Array.from({ length: to - from }, (_, i) => i + from),
    PARALLEL,
    async (i) => {
      const { namespace, body } = clusterPolicy(i);
      await cluster.api('POST', `/apis/networking.k8s.io/v1/namespaces/${namespace}/networkpolicies`, body);
    },
  );
}

/**
 * The datastore at size: NAMESPACES namespaces, PODS pods with their addresses (about 110 on the
 * enforcing node), POLICIES policies. The seconds the pods took (a figure).
 */
export async function populate(cluster: Cluster): Promise<{ podsSeconds: number }> {
  const { core, api } = cluster;
  log(`creating ${NAMESPACES} namespaces, ${PODS} pods (with their addresses), ${POLICIES} policies, ${PARALLEL} requests at a time`);
  let populateStart = process.hrtime.bigint();
  await parallel(
    Array.from({ length: NAMESPACES }, (_, n) => n),
    PARALLEL,
    (n) => core.createNamespace({ body: { metadata: { name: namespaceName(n), labels: { team: `t${n % 5}` } } } }),
  );
  await parallel(
    Array.from({ length: PODS }, (_, i) => i),
    PARALLEL,
    async (i) => {
      const { namespace, body, address } = remotePod(i);
      const created = await api('POST', `/api/v1/namespaces/${namespace}/pods`, body);
      created['status'] = { ...(created['status'] as object), phase: 'Running', podIP: address, podIPs: [{ ip: address }] };
      await api('PUT', `/api/v1/namespaces/${namespace}/pods/${body.metadata.name}/status`, created);
      if (i % 2000 === 1999) log(`  ${i + 1} pods`);
    },
  );
  const podsSeconds = ms(populateStart, process.hrtime.bigint()) / 1000;
  populateStart = process.hrtime.bigint();
  await createPolicies(cluster, 0, POLICIES);
  const policiesSeconds = ms(populateStart, process.hrtime.bigint()) / 1000;
  log(`  pods in ${podsSeconds.toFixed(1)} s, policies in ${policiesSeconds.toFixed(1)} s`);
  return { podsSeconds };
}
