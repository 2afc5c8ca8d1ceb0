// Part 2 of bench/nodes.ts: a 100-replica Deployment spread evenly over the three nodes
// (topologySpreadConstraints on kubernetes.io/hostname, maxSkew 1), timed from `kubectl create`
// until every replica is Running with an address, and the CPU each program spent meanwhile and
// the requests the API server handled (read before the clock starts and after it stops).

import type { Cluster } from '../../scripts/lib/cluster.ts';
import { getJson } from '../../test/helpers/cluster.ts';
import { eventually } from '../../test/e2e/install.ts';
import { requestCounts, requestsBetween } from '../lib/api-requests.ts';
import { trackCpu, type CpuSeconds } from '../lib/cpu-usage.ts';
import { benchDeploymentFile } from '../lib/deployment.ts';
import { REPLICAS } from './settings.ts';

export interface Deployed {
  seconds: number;
  /** Running replicas by node. */
  perNode: Record<string, number>;
  cpu: CpuSeconds;
  /** The API server's requests meanwhile, by verb and resource (`POST crd.projectnet.org/ipamhandles`), most first. */
  apiRequests: [string, number][];
}

/** Creates the Deployment (one object: no second ReplicaSet) and waits until every replica is Running with a pod IP. */
export async function deploy(c: Cluster): Promise<Deployed> {
  const requestsBefore = requestCounts(await c.kubectl('get', '--raw', '/metrics'));
  const cpu = await trackCpu();
  const started = process.hrtime.bigint();
  await c.kubectl('create', '-f', benchDeploymentFile(c, REPLICAS, { spreadOverNodes: true }));
  const running = await eventually(
    `${REPLICAS} replicas Running`,
    async () => {
      const pods = (await getJson(c, 'pods', '-l', 'app=bench')).items as any[];
      const up = pods.filter((p) => p.status.phase === 'Running' && p.status.podIP && !p.metadata.deletionTimestamp);
      return up.length >= REPLICAS ? up : undefined;
    },
    600,
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const used = await cpu.stop();
  const apiRequests = requestsBetween(requestsBefore, requestCounts(await c.kubectl('get', '--raw', '/metrics')));
  const perNode: Record<string, number> = {};
  for (const node of c.nodes) perNode[node.name] = 0;
  for (const pod of running) perNode[pod.spec.nodeName] = (perNode[pod.spec.nodeName] ?? 0) + 1;
  const empty = Object.entries(perNode).filter(([, n]) => n === 0);
  if (empty.length > 0) throw new Error(`no replica on ${empty.map(([name]) => name).join(', ')}: ${JSON.stringify(perNode)}`);
  return { seconds, perNode, cpu: used, apiRequests };
}

/** Deletes the Deployment and waits until its pods are gone. */
export async function undeploy(c: Cluster): Promise<void> {
  await c.kubectl('delete', 'deployment', 'bench', '--wait=true', '--timeout=120s');
  await eventually(
    'the replicas gone',
    async () => ((await getJson(c, 'pods', '-l', 'app=bench')).items.length === 0 ? true : undefined),
    300,
  );
}
