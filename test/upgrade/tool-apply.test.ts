// netplugctl upgrade apply/status/rollback on a real kube-apiserver holding v3.30.0 installed with
// `kubectl create -f` (no kubelet, no controllers: the tests write the rollout status the
// DaemonSet and Deployment controllers would, and ClusterInformation as netplug-node would). The
// record in the cluster, the field-manager migration pruning what 3.31 dropped, a wait that gives
// up and a resume that does not redo done steps, a second apply that does nothing, a rollback to
// the saved objects, and a rollback refused for a one-way step. Kills of the real executable at
// every step, under the real kubelet: tool-manifest-kdd.test.ts.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

import test from 'ava';

import { NODE_VERSION_ANNOTATION as VERSION_ANNOTATION } from '../../ts/store/kubernetes/resources.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { tempDir } from '../helpers/cni.ts';
import { NETPLUGCTL } from '../helpers/ipam.ts';
import { startKube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { loadAllYaml } from '@kubernetes/client-node';
import {
  adminKube,
  createNode,
  kubectlCreate,
  netplugctl,
  previousManifest,
  releaseFile,
  setClusterVersion,
  settleRollouts,
} from './tool-fixtures.ts';

let kubeconfig: string;
const shared = sharedTeardowns(test);
const DS = { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'netplug-node', namespace: 'kube-system' };
const CONTROLLERS = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'netplug-kube-controllers', namespace: 'kube-system' };
const RECORD = { apiVersion: 'v1', kind: 'ConfigMap', name: 'netplug-upgrade', namespace: 'kube-system' };
const NODE_A = { apiVersion: 'v1', kind: 'Node', name: 'node-a' };

test.before(async () => {
  const kube = await startKube(shared);
  kubeconfig = kube.server.admin.kubeconfig;
  const dir = tempDir(shared, 'previous');
  kubectlCreate(kubeconfig, dir, 'crds.yaml', previousManifest('crds.yaml'));
  kubectlCreate(kubeconfig, dir, 'netplug.yaml', previousManifest('netplug.yaml'));
  const api = adminKube(kubeconfig);
  await createNode(api, 'node-a');
  // No node pods without a kubelet: the controllers would report 0 scheduled.
  await settleRollouts(api, 'kube-system', 0);
  await setClusterVersion(kubeconfig, 'v3.30.0');
  // A ConfigMap owned by a netplug resource: the upgrade strips the reference first and restores it after.
  const pool = await api.create({
    apiVersion: 'crd.projectnet.org/v1',
    kind: 'IPPool',
    metadata: { name: 'owner-pool' },
    spec: {
      kind: 'IPPool',
      apiVersion: 'projectnet.org/v3',
      metadata: { name: 'owner-pool' },
      spec: { cidr: '10.77.0.0/24', blockSize: 26 },
    },
  });
  poolUid = pool.metadata.uid;
  await api.create({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      ...OWNED,
      ownerReferences: [{ apiVersion: 'crd.projectnet.org/v1', kind: 'IPPool', name: 'owner-pool', uid: pool.metadata.uid }],
    },
  });
});

const OWNED = { name: 'owned-by-pool', namespace: 'default' };
let poolUid: string;
const ownerUids = async () =>
  ((await adminKube(kubeconfig).get({ apiVersion: 'v1', kind: 'ConfigMap', ...OWNED })).metadata.ownerReferences ?? []).map(
    (o: any) => o.uid,
  );

const files = () => ['--kubeconfig', kubeconfig, '--manifest', releaseFile('netplug.yaml'), '--crds', releaseFile('crds.yaml')];
const record = async () => JSON.parse((await adminKube(kubeconfig).get(RECORD)).data['record.json']);
/** What the built netplugctl version prints on the Kubernetes datastore. */
const nodeTable = () =>
  execFileSync(NETPLUGCTL, ['version', '--kubeconfig', kubeconfig], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
const agentEnv = (ds: any) => ds.spec.template.spec.containers.find((c: any) => c.name === 'netplug-node').env.map((e: any) => e.name);

test.serial(
  'apply records its progress, prunes what kubectl-create owned, gives up on a rollout that does not finish and says how to resume',
  async (t) => {
    const api = adminKube(kubeconfig);
    const before = await api.get(DS);
    t.true(agentEnv(before).includes('NETPLUG_LEGACY_STATUS_FILE'));
    const run = await netplugctl(['upgrade', 'apply', '--yes', '--timeout', '4s', ...files()]);
    t.log(run.out);
    t.is(run.code, 1);
    t.regex(
      run.err,
      /^netplugctl upgrade apply: step 5 \(wait-rollout\) failed: gave up after 4 s waiting for the rollout of DaemonSet kube-system\/netplug-node: .*; run apply again to resume, or netplugctl upgrade rollback\n$/,
    );
    const ds = await api.get(DS);
    t.true(ds.spec.template.spec.containers.every((c: any) => c.image === `localhost/netplug:${NETPLUG_VERSION}`));
    t.false(agentEnv(ds).includes('NETPLUG_LEGACY_STATUS_FILE'), 'the env var kubectl-create owned is gone');
    t.is(ds.spec.template.spec.initContainers, undefined, 'upgrade-ipam is gone');
    t.false(ds.spec.template.spec.volumes.some((v: any) => v.name === 'legacy-status'));
    t.false(ds.metadata.managedFields.some((m: any) => m.manager === 'kubectl-create'));
    const saved = await record();
    t.is(saved.state, 'failed');
    t.is(saved.from, 'v3.30.0');
    t.deepEqual(
      Object.entries(saved.progress).map(([id, p]: [string, any]) => `${id}:${p.state}`),
      [
        'strip-owner-references:done',
        'migrate-field-managers:done',
        'apply-crds:done',
        'apply-manifest:done',
        'wait-rollout:failed',
        'restore-owner-references:pending',
        'check-version:pending',
        'node-version-records:pending',
      ],
    );
    t.deepEqual(await ownerUids(), [], 'the owner reference is stripped (and recorded) for the upgrade');
    const backup = JSON.parse((await api.get(RECORD)).data['backup.DaemonSet.kube-system.netplug-node']);
    t.true(agentEnv(backup.object).includes('NETPLUG_LEGACY_STATUS_FILE'), 'the DaemonSet as it was before the apply is saved');
    // Saved after the field-manager migration (which changed only managedFields), before the apply.
    t.is(saved.progress['apply-manifest'].before['DaemonSet.kube-system.netplug-node'], backup.object.metadata.resourceVersion);
    t.true(Number(backup.object.metadata.resourceVersion) > Number(before.metadata.resourceVersion));

    const status = await netplugctl(['upgrade', 'status', '--kubeconfig', kubeconfig]);
    t.log(status.out);
    t.is(status.code, 0);
    t.regex(
      status.out,
      /^Upgrade v3\.30\.0 → v3\.31\.\d+ \(manifest install in kube-system\), started .*: failed, step 5\/8 wait-rollout$/m,
    );
    const manifestObjects = loadAllYaml(readFileSync(releaseFile('netplug.yaml'), 'utf8')).length;
    t.regex(status.out, new RegExp(`^ +4\\. done +apply-manifest: ${manifestObjects} objects applied$`, 'm'));
    t.regex(status.out, /DaemonSet kube-system\/netplug-node: .*new spec not yet seen by the controller \(in progress\)/);
    t.regex(status.out, /^Cluster Version: v3\.30\.0$/m);
    // No pod without a kubelet, and an agent from before nodes recorded their release.
    t.regex(status.out, /^ {2}node-a: no netplug-node pod; no release recorded$/m);
  },
);

test.serial(
  'a second apply resumes at the failed step without redoing the done ones, and finishes once the rollout has; a third does nothing',
  async (t) => {
    const api = adminKube(kubeconfig);
    const applied = (await api.get(DS)).metadata.resourceVersion;
    // What the DaemonSet controller and the new netplug-node would now write.
    await settleRollouts(api, 'kube-system', 0);
    await api.mergePatch(NODE_A, { metadata: { annotations: { [VERSION_ANNOTATION]: NETPLUG_VERSION } } });
    await setClusterVersion(kubeconfig, NETPLUG_VERSION);
    const run = await netplugctl(['upgrade', 'apply', '--yes', '--timeout', '20s', ...files()]);
    t.log(run.out);
    t.is(run.code, 0, run.err);
    t.regex(run.out, /^Resuming the upgrade to v3\.31\.\d+/);
    t.notRegex(run.out, /\[[1234]\/8\]/, 'steps 1 to 4 not run again');
    t.regex(run.out, /\[5\/8\] Wait for the rollout/);
    t.regex(run.out, /\[6\/8\] Restore the recorded owner references.*\n.*done: 1 restored/);
    t.regex(run.out, /\[7\/8\] Check the version.*\n.*done: Cluster Version v3\.31\.\d+/);
    t.regex(run.out, /\[8\/8\] Read the release each node records.*\n.*done: 1 node\(s\) record v3\.31\.\d+\n/);
    t.deepEqual(await ownerUids(), [poolUid], "the owner reference is back, with the owner's UID");
    const ds = await api.get(DS);
    t.is(ds.metadata.generation, (await api.get(DS)).metadata.generation);
    t.true(Number(ds.metadata.resourceVersion) >= Number(applied));
    t.is((await record()).state, 'done');

    const rvs = async () => [(await api.get(DS)).metadata.resourceVersion, (await api.get(RECORD)).metadata.resourceVersion].join();
    const before = await rvs();
    const again = await netplugctl(['upgrade', 'apply', '--yes', ...files()]);
    t.is(again.code, 0, again.err);
    t.regex(again.out, /the upgrade to v3\.31\.\d+ is complete .*: nothing to do/);
    t.is(await rvs(), before, 'nothing written');
  },
);

test.serial('rollback puts the saved DaemonSet and Deployment back, waits for their rollout, and marks the record', async (t) => {
  const api = adminKube(kubeconfig);
  // The controllers' part, as the restored templates roll out.
  const settle = setInterval(() => settleRollouts(api, 'kube-system', 0).catch(() => undefined), 500);
  t.teardown(() => clearInterval(settle));
  const run = await netplugctl(['upgrade', 'rollback', '--kubeconfig', kubeconfig, '--timeout', '30s']);
  t.log(run.out);
  t.is(run.code, 0, run.err);
  // v3.30.0 has no network policy: enforcement goes off, and the node pods restart with it, before anything is put back.
  t.regex(
    run.out,
    /policy: v3\.30\.0 has no network policy: turning enforcement off first[^\n]*\n(.*\n)* {2}policy: enforcement off \(ConfigMap kube-system\/netplug-config policy_enforcement "false", the node pods restarted\); DaemonSet kube-system\/netplug-node rolled out: [^\n]*\n(.*\n)* {2}apply-manifest: 14 object\(s\) restored/,
  );
  t.is((await record()).policyOff.state, 'restored');
  const config = await api.get({ apiVersion: 'v1', kind: 'ConfigMap', name: 'netplug-config', namespace: 'kube-system' });
  t.false('policy_enforcement' in config.data, "v3.30.0's netplug-config, as it was");
  t.is((await api.get(DS)).spec.template.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt'], undefined, 'the template as it was');
  t.regex(run.out, /apply-crds: kept: the new CRDs serve every version/);
  t.regex(run.out, /migrate-field-managers: kept: only which manager owns the fields changed/);
  t.regex(run.out, /rolled back: the cluster runs v3\.30\.0 again/);
  // v3.30.0's agents record no release: the new agent's record on node-a goes, once v3.30.0 runs.
  t.regex(
    run.out,
    /apply-manifest: [^\n]*\n(.*\n)*.*node pods Ready at v3\.30\.0\n {2}node-version-records: the release recorded on 1 node\(s\) removed \(annotation projectnet\.org\/netplug-version: node-a\)\n/,
  );
  t.is((await api.get(NODE_A)).metadata.annotations?.[VERSION_ANNOTATION], undefined);
  t.regex(nodeTable(), /^node-a +\(none recorded\)$/m);
  const ds = await api.get(DS);
  t.true(ds.spec.template.spec.containers.every((c: any) => c.image === 'localhost/netplug:v3.30.0'));
  t.true(agentEnv(ds).includes('NETPLUG_LEGACY_STATUS_FILE'));
  t.deepEqual(
    ds.spec.template.spec.initContainers.map((c: any) => c.name),
    ['upgrade-ipam'],
  );
  t.is((await api.get(CONTROLLERS)).spec.template.spec.containers[0].image, 'localhost/netplug:v3.30.0');
  t.is((await record()).state, 'rolled-back');
  const again = await netplugctl(['upgrade', 'rollback', '--kubeconfig', kubeconfig]);
  t.is(again.code, 0);
  t.regex(again.out, /rolled back already/);
});

test.serial('rollback refuses when a step that ran is one-way, saying why, and changes nothing', async (t) => {
  const api = adminKube(kubeconfig);
  const map = await api.get(RECORD);
  const saved = JSON.parse(map.data['record.json']);
  saved.state = 'done';
  for (const step of saved.steps) {
    saved.progress[step.id].state = 'done';
    if (step.id === 'apply-crds')
      Object.assign(step, { rollback: 'one-way', why: 'the storage version of ippools.crd.projectnet.org changes' });
  }
  await api.replace({ ...map, data: { ...map.data, 'record.json': JSON.stringify(saved) } });
  const ds = (await api.get(DS)).metadata.resourceVersion;
  const run = await netplugctl(['upgrade', 'rollback', '--kubeconfig', kubeconfig]);
  t.is(run.code, 1);
  t.is(
    run.err,
    'netplugctl upgrade rollback: cannot roll back: step apply-crds is one-way (the storage version of ippools.crd.projectnet.org changes); nothing was changed\n',
  );
  t.is((await api.get(DS)).metadata.resourceVersion, ds);
  t.is((await record()).state, 'done');
  await api.delete(RECORD);
});

test.serial('status and rollback with no upgrade recorded', async (t) => {
  const status = await netplugctl(['upgrade', 'status', '--kubeconfig', kubeconfig, '-o', 'json']);
  t.is(status.code, 0, status.err);
  const json = JSON.parse(status.out);
  t.is(json.upgrade, null);
  t.is(json.clusterVersion, NETPLUG_VERSION);
  const rollback = await netplugctl(['upgrade', 'rollback', '--kubeconfig', kubeconfig]);
  t.is(rollback.code, 1);
  t.is(rollback.err, 'netplugctl upgrade rollback: no upgrade recorded (no ConfigMap kube-system/netplug-upgrade): nothing to roll back\n');
});
