// Two replicas of netplug-operator (the built executable, two processes, as a Deployment's two pods
// or a rolling update's old and new one) against a real kube-apiserver: one holds Lease
// netplug-operator and reconciles, the other stands by, ready, and writes nothing. Each replica
// runs a different NETPLUG_IMAGE, so the DaemonSet's image says which one wrote it. When the
// leader is stopped (SIGTERM) it releases the Lease, and the other takes over and reconciles (the
// DaemonSet takes its image, and a change of the Installation converges). Short lease timings come
// from the environment.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

import test, { type ExecutionContext } from 'ava';
import * as k8s from '@kubernetes/client-node';

import { OPERATOR } from '../../ts/render/operator.ts';
import { ROOT } from '../helpers/cni.ts';
import { installCrds, startKube } from '../helpers/kube.ts';
import { eventually } from '../helpers/eventually.ts';
import {
  type Cluster,
  condition,
  createInstallation,
  httpStatus,
  installOperatorCrds,
  metric,
  operatorEnv,
  operatorIdentity,
  patchInstallation,
  readConflist,
  readDaemonSet,
  readInstallation,
  reconciles,
  removeInstallation,
} from './helpers.ts';

const EXECUTABLE = join(ROOT, 'dist/bin/netplug-operator');

interface Replica {
  name: string;
  image: string;
  health: string;
  output: string[];
  process: ChildProcess;
  exited: Promise<number | null>;
}

function startReplica(t: ExecutionContext, name: string, env: NodeJS.ProcessEnv): Replica {
  const output: string[] = [];
  const child = spawn(EXECUTABLE, [], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env, POD_NAME: name },
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
  const address = env['NETPLUG_OPERATOR_HEALTH_ADDR'] ?? '';
  return { name, image: env['NETPLUG_IMAGE'] ?? '', health: `http://${address}`, output, process: child, exited };
}

const leads = async (replica: Replica) => (await metric(replica.health, 'netplug_leader_election_leader')) === 1;
const imageOf = async (cluster: Cluster) =>
  (await readDaemonSet(cluster).catch(() => undefined))?.spec?.template.spec?.containers[0]?.image;

test('two replicas: one leads and writes, the other stands by ready and writes nothing; a stopped leader hands over to the other', async (t) => {
  const kube = await startKube(t);
  await installCrds(kube);
  const config = kube.config;
  const extensions = config.makeApiClient(k8s.ApiextensionsV1Api);
  await installOperatorCrds(extensions);
  const identity = await operatorIdentity(kube, OPERATOR);
  const cluster: Cluster = {
    kube,
    apps: config.makeApiClient(k8s.AppsV1Api),
    custom: config.makeApiClient(k8s.CustomObjectsApi),
    extensions,
    log: [],
    health: '',
  };
  const lease = {
    LEADER_ELECTION_LEASE_DURATION: '4s',
    LEADER_ELECTION_RENEW_DEADLINE: '3s',
    LEADER_ELECTION_RETRY_PERIOD: '500ms',
  };
  const replicas = [
    startReplica(t, 'operator-a', { ...(await operatorEnv(identity)), ...lease, NETPLUG_IMAGE: 'localhost/netplug:replica-a' }),
    startReplica(t, 'operator-b', { ...(await operatorEnv(identity)), ...lease, NETPLUG_IMAGE: 'localhost/netplug:replica-b' }),
  ];
  await eventually('both ready, one of them leading', async () => {
    const ready = await Promise.all(replicas.map(async (r) => (await httpStatus(`${r.health}/readyz`)).code === 200));
    const leading = await Promise.all(replicas.map(leads));
    return ready.every(Boolean) && leading.filter(Boolean).length === 1;
  });
  const leaderIndex = (await leads(replicas[0] as Replica)) ? 0 : 1;
  const leader = replicas[leaderIndex] as Replica;
  const standby = replicas[1 - leaderIndex] as Replica;
  t.true(leader.output.join('').includes('leading: holding Lease netplug-operator/netplug-operator'));

  // The leader makes the Installation real, with its image; a change converges, still from the leader.
  await createInstallation(cluster, { calicoNetwork: { ipPools: [{ cidr: '10.244.0.0/16' }] } });
  await eventually("the leader's DaemonSet", async () => (await imageOf(cluster)) === leader.image);
  await patchInstallation(cluster, { spec: { calicoNetwork: { linuxPolicySetupTimeoutSeconds: 7 } } });
  await eventually('the change', async () => (await readConflist(cluster)).plugins[0].policy_setup_timeout_seconds === 7);
  await eventually('the status of the change', async () => {
    const installation = await readInstallation(cluster);
    return installation?.status?.observedGeneration === installation?.metadata.generation;
  });
  t.is(await imageOf(cluster), leader.image, 'only the leader wrote the DaemonSet');
  t.true((await reconciles(leader.health)) > 0);
  t.is(await reconciles(standby.health), 0, 'the standby reconciled nothing');
  t.false(await leads(standby));
  t.is((await httpStatus(`${standby.health}/readyz`)).code, 200, 'a standby is ready');

  // The leader stops (a rolling update's old pod): it releases the Lease, the other takes over and reconciles.
  leader.process.kill('SIGTERM');
  t.is(await leader.exited, 0);
  t.true(leader.output.join('').includes('released Lease'));
  await eventually('the other replica leads', () => leads(standby));
  await eventually("the new leader's image on the DaemonSet", async () => (await imageOf(cluster)) === standby.image);
  await patchInstallation(cluster, { spec: { calicoNetwork: { linuxPolicySetupTimeoutSeconds: 3 } } });
  await eventually('the next change', async () => (await readConflist(cluster)).plugins[0].policy_setup_timeout_seconds === 3);
  t.true((await reconciles(standby.health)) > 0);
  t.like(condition(await readInstallation(cluster), 'Degraded'), { status: 'False' });

  // The new leader also cleans up.
  await removeInstallation(cluster);
  standby.process.kill('SIGTERM');
  t.is(await standby.exited, 0);
});
