// Two replicas of netplug-kube-controllers (the built executable, two processes) against a real
// kube-apiserver and etcd: one holds the Lease and reconciles, the other stands by (ready, and
// reconciling nothing); when the leader is stopped (SIGTERM) it releases the Lease, and the other
// takes over and does the work (a deleted node's addresses released). Short lease timings are
// given by the environment.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';

import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { ROOT } from '../helpers/cni.ts';
import { freePort, startEtcd } from '../helpers/etcd.ts';
import { startKube, type Kube } from '../helpers/kube.ts';
import { eventually } from '../helpers/eventually.ts';
import {
  allocateFor,
  CONTROLLER_RULES,
  controllersIdentity,
  createNodeResource,
  createPool,
  isReleased,
  leaseNamespaceOf,
  status,
} from './fixtures.ts';

const EXECUTABLE = join(ROOT, 'dist/bin/netplug-kube-controllers');

interface Replica {
  name: string;
  health: string;
  output: string[];
  process: ChildProcess;
  exited: Promise<number | null>;
}

function startReplica(t: ExecutionContext, name: string, port: number, env: Record<string, string>): Replica {
  const output: string[] = [];
  const child = spawn(EXECUTABLE, [], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env, POD_NAME: name, NETPLUG_CONTROLLERS_HEALTH_ADDR: `127.0.0.1:${port}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (data: Buffer) => output.push(data.toString()));
  child.stderr?.on('data', (data: Buffer) => output.push(data.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    if (!t.passed) t.log(`${name}:\n${output.join('')}`);
  });
  return { name, health: `http://127.0.0.1:${port}`, output, process: child, exited };
}

/** A metric's value from a replica's /metrics (0 when absent). */
async function metric(replica: Replica, name: string, labels: string): Promise<number> {
  const { text } = await status(`${replica.health}/metrics`);
  const lines = text.split('\n').filter((line) => line.startsWith(`${name}{`) && line.includes(labels));
  return lines.reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

const leads = async (replica: Replica) => (await metric(replica, 'netplug_leader_election_leader', '')) === 1;
const reconciles = (replica: Replica) => metric(replica, 'netplug_controller_reconcile_total', 'controller="node"');

/** A node with an address, deleted from Kubernetes: what the node controller releases. */
async function deletedNodeWithAddress(kube: Kube, store: Store, name: string) {
  await kube.core.createNode({ body: { metadata: { name } } });
  await createNodeResource(store, name, {});
  const address = await allocateFor(store, name);
  await kube.core.deleteNode({ name });
  return address;
}

test('two replicas: one leads and reconciles, the other stands by ready; a stopped leader hands over to the other', async (t) => {
  const [kube, etcd] = await Promise.all([startKube(t), startEtcd(t)]);
  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-replicas', CONTROLLER_RULES);
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  await createPool(store, 'replicas', '10.75.0.0/16');
  const env = {
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: identity.kubeconfig,
    ENABLED_CONTROLLERS: 'node',
    LEADER_ELECTION_NAMESPACE: leaseNamespaceOf(identity),
    LEADER_ELECTION_LEASE_DURATION: '4s',
    LEADER_ELECTION_RENEW_DEADLINE: '3s',
    LEADER_ELECTION_RETRY_PERIOD: '500ms',
  };
  const replicas = [startReplica(t, 'replica-a', await freePort(), env), startReplica(t, 'replica-b', await freePort(), env)];
  await eventually('both ready, one of them leading', async () => {
    const ready = await Promise.all(replicas.map(async (r) => (await status(`${r.health}/readyz`)).code === 200));
    const leading = await Promise.all(replicas.map(leads));
    return ready.every(Boolean) && leading.filter(Boolean).length === 1;
  });
  const leaderIndex = (await leads(replicas[0] as Replica)) ? 0 : 1;
  const leader = replicas[leaderIndex] as Replica;
  const standby = replicas[1 - leaderIndex] as Replica;
  t.true(leader.output.join('').includes('leading: holding Lease'));

  const first = await deletedNodeWithAddress(kube, store, 'replicas-gone-1');
  await eventually("the leader releases the deleted node's address", () => isReleased(store, first));
  t.true((await reconciles(leader)) > 0);
  t.is(await reconciles(standby), 0, 'the standby reconciled nothing');
  t.false(await leads(standby));
  t.is((await status(`${standby.health}/readyz`)).code, 200, 'a standby is ready');

  leader.process.kill('SIGTERM');
  t.is(await leader.exited, 0);
  t.true(leader.output.join('').includes('released Lease'));
  await eventually('the other replica leads', () => leads(standby));
  const second = await deletedNodeWithAddress(kube, store, 'replicas-gone-2');
  await eventually("the new leader releases the next deleted node's address", () => isReleased(store, second));
  t.true((await reconciles(standby)) > 0);
  standby.process.kill('SIGTERM');
  t.is(await standby.exited, 0);
});
