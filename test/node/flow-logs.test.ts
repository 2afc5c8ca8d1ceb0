// Flow logs proved with real packets: a node (policy-node.ts) enforcing policy with flow logs on
// (every second), its pods' connections allowed and denied by a Kubernetes NetworkPolicy, and the
// flow-log aggregator (netplug-flows, in this process) taking the node's records with a token
// of the node's ServiceAccount for audience netplug-flows, checked by the real API server. The
// built netplugctl reads them back: the allowed flow with its policy, packets and bytes, the denied
// one with what denied it. Then the aggregator goes away: pods keep connecting, the records the
// node could not send are counted as dropped.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn, spawnSync } from 'node:child_process';

import test from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { hostInterfaceName } from '../../ts/dataplane/index.ts';
import type { FlowRecord } from '../../ts/model/flow.ts';
import { eventually } from '../helpers/eventually.ts';
import { freePort } from '../helpers/etcd.ts';
import { NETPLUGCTL } from '../helpers/ipam.ts';
import type { Kube } from '../helpers/kube.ts';
import type { TestNode } from '../helpers/nodes.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import {
  connects,
  createRunningPod,
  echoListener,
  metricValue,
  plugNetns,
  reaches,
  settles,
  startPolicyNode,
  type PolicyNode,
} from './policy-node.ts';

const NAMESPACE = `flows-${process.pid}`;
const shared = sharedTeardowns(test);

let policyNode: PolicyNode;
let kube: Kube;
let node: TestNode;
let readPort: number;
let stopAggregator: () => Promise<void>;
let aggregatorLog = '';
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface TestPod {
  name: string;
  netns: { name: string; path: string };
  address: string;
}

async function plugPod(name: string, address: string, labels: Record<string, string>): Promise<TestPod> {
  const netns = plugNetns(shared, node, `npflow-${name}-${process.pid}`, address, hostInterfaceName('cali', `${NAMESPACE}.${name}`));
  await createRunningPod(kube, { namespace: NAMESPACE, name, labels, nodeName: node.name, addresses: [address] });
  echoListener(shared, netns);
  return { name, netns, address };
}

/** `netplugctl flows --server ... args` (the built binary); its exit code and output. */
function flows(...args: string[]) {
  const run = spawnSync(NETPLUGCTL, ['flows', '--server', `http://127.0.0.1:${readPort}`, ...args], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin' },
    timeout: 30_000,
  });
  return { code: run.status, out: run.stdout, err: run.stderr };
}

const records = (...args: string[]): FlowRecord[] => {
  const run = flows('--namespace', NAMESPACE, '-o', 'json', ...args);
  if (run.code !== 0) throw new Error(run.err);
  const parsed = JSON.parse(run.out) as FlowRecord[] | { records: FlowRecord[] };
  return Array.isArray(parsed) ? parsed : parsed.records;
};

/** A pod the first test plugged in, by its name and address (its namespace outlives that test). */
const plugged = (name: string, address: string) => ({ name, netns: { name: `npflow-${name}-${process.pid}`, path: '' }, address });

test.before(async () => {
  const writePort = await freePort();
  readPort = await freePort();
  policyNode = await startPolicyNode(shared, 'fl1', 'kubernetes', [writePort]);
  ({ kube, node } = policyNode);
  await kube.core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  shared.teardown(() => kube.core.deleteNamespace({ name: NAMESPACE }).catch(() => undefined));

  // The node's identity for the aggregator: its ServiceAccount's token for audience netplug-flows.
  const account = `netplug-node-${process.pid}`;
  await kube.core.createNamespacedServiceAccount({ namespace: 'kube-system', body: { metadata: { name: account } } });
  shared.teardown(() => kube.core.deleteNamespacedServiceAccount({ namespace: 'kube-system', name: account }).catch(() => undefined));
  const token = (await kube.core.createNamespacedServiceAccountToken({
    namespace: 'kube-system',
    name: account,
    body: { spec: { audiences: ['netplug-flows'], expirationSeconds: 3600 } } as k8s.AuthenticationV1TokenRequest,
  })) as k8s.AuthenticationV1TokenRequest;
  const dir = mkdtempSync(join(tmpdir(), 'np-flows-'));
  shared.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'token'), token.status?.token ?? '');

  // The built program, in a process of its own: this one blocks while netplugctl and the probes run.
  const aggregator = spawn(join(ROOT, 'dist/bin/netplug-flows'), [], {
    env: {
      PATH: '/usr/bin:/bin',
      KUBECONFIG: kube.server.admin.kubeconfig,
      NETPLUG_FLOWS_LISTEN: `127.0.0.1:${writePort}`,
      NETPLUG_FLOWS_READ_LISTEN: `127.0.0.1:${readPort}`,
      NETPLUG_FLOWS_HEALTH_ADDR: `127.0.0.1:${await freePort()}`,
      NETPLUG_FLOWS_WRITERS: `kube-system:${account}`,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  aggregator.stderr.setEncoding('utf8').on('data', (text: string) => {
    aggregatorLog += text;
  });
  stopAggregator = async () => {
    if (aggregator.exitCode !== null) return;
    const exited = new Promise((resolve) => aggregator.once('exit', resolve));
    aggregator.kill('SIGTERM');
    await exited;
  };
  await eventually('netplug-flows listening', () => /serving reads on/.test(aggregatorLog));
  shared.teardown(() => stopAggregator());

  Object.assign(policyNode.agentEnv, {
    NETPLUG_FLOW_LOGS: 'true',
    NETPLUG_FLOW_LOGS_INTERVAL: '1',
    NETPLUG_FLOW_LOGS_AGGREGATOR: `http://127.0.0.1:${writePort}`,
    NETPLUG_FLOW_LOGS_TOKEN_FILE: join(dir, 'token'),
  });
});

test.afterEach.always((t) => {
  if (!t.passed) t.log(`${policyNode.log().split('\n').slice(-40).join('\n')}\nnetplug-flows:\n${aggregatorLog}`);
});

test.serial('allowed and denied flows reach the aggregator with the policy that decided them; netplugctl flows filters them', async (t) => {
  const web = await plugPod('web', '10.81.0.10', { app: 'web' });
  const client = await plugPod('client', '10.81.0.11', { app: 'client' });
  const other = await plugPod('other', '10.81.0.12', { app: 'other' });
  await policyNode.networking.createNamespacedNetworkPolicy({
    namespace: NAMESPACE,
    body: {
      metadata: { name: 'web-from-client' },
      spec: { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ _from: [{ podSelector: { matchLabels: { app: 'client' } } }] }] },
    },
  });
  policyNode.startAgent();
  t.true(await reaches(client, web));
  t.true(await settles(other, web, false));

  await eventually(
    'the allowed and denied flows at the aggregator',
    () => {
      // Traffic goes on: a connection each try (what the agent's first moments saw may not be recorded).
      connects(client, web);
      const held = records();
      return held.some((r) => r.action === 'Allow' && r.destination.name === 'web' && r.bytes > 0) && held.some((r) => r.action === 'Deny');
    },
    {
      context: () =>
        JSON.stringify([
          ...new Set(
            records().map((r) => [r.source.address, r.source.name, r.destination.name, r.action, r.policy.policy, r.packets].join(' ')),
          ),
        ]),
    },
  );
  const allowed = records('--action', 'Allow', '--pod', `${NAMESPACE}/client`).filter(
    (r) => r.destination.name === 'web' && r.reporter === 'dst',
  );
  t.true(allowed.length > 0);
  t.like(allowed[0], {
    node: node.name,
    source: { kind: 'pod', namespace: NAMESPACE, name: 'client', labels: { app: 'client' } },
    destination: { kind: 'pod', namespace: NAMESPACE, name: 'web', port: 8080 },
    protocol: 6,
    reporter: 'dst',
    policy: { policy: `NetworkPolicy/${NAMESPACE}/knp.default.web-from-client`, action: 'Allow' },
  });
  t.true(allowed.reduce((n, r) => n + r.packets, 0) >= 4, 'packets counted by connection tracking');
  const denied = records('--action', 'Deny');
  t.true(denied.every((r) => r.source.name === 'other' && r.destination.name === 'web'));
  t.like(denied[0], { reporter: 'dst', policy: { policy: 'default-deny', tier: 'default', action: 'Deny' } });
  t.true(records('--policy', 'web-from-client').every((r) => r.action === 'Allow'));

  const table = flows('--namespace', NAMESPACE, '--action', 'Deny');
  t.is(table.code, 0, table.err);
  t.regex(table.out, new RegExp(`${NAMESPACE}/other\\s+${NAMESPACE}/web:8080\\s+TCP`));
  t.true(metricValue(policyNode.agentGet('/metrics').text, 'netplug_flows_denied_total{policy="default-deny"}') > 0);
});

test.serial(
  'with flow logs on, a stopped agent leaves the doors as they were; started again, it records the allowed flows again',
  async (t) => {
    const [web, client, other] = [plugged('web', '10.81.0.10'), plugged('client', '10.81.0.11'), plugged('other', '10.81.0.12')];
    t.is(await policyNode.stopAgent(), 0);
    t.false(connects(other, web), 'other → web stays closed while the agent is away');
    t.true(connects(client, web), 'client → web stays open (its rule still marks the connection for flow logs)');
    const restarted = Date.now();
    policyNode.startAgent();
    await eventually('an allowed flow recorded after the restart', () => {
      connects(client, web);
      return records('--action', 'Allow').some((r) => r.destination.name === 'web' && r.end >= restarted && r.flows > 0);
    });
    t.true(await settles(other, web, false), 'other → web still closed');
  },
);

test.serial('without the aggregator pods keep connecting; the records not sent are counted as dropped', async (t) => {
  await stopAggregator();
  const [web, client] = [plugged('web', '10.81.0.10'), plugged('client', '10.81.0.11')];
  const dropped = () => metricValue(policyNode.agentGet('/metrics').text, 'netplug_flow_records_dropped_total{reason="unreachable"}');
  const before = dropped();
  await eventually('records dropped while the aggregator is away', () => connects(client, web) && dropped() > before);
  t.true(connects(client, web));
});
