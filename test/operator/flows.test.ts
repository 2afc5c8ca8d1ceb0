// The operator's flow-log kinds against a real kube-apiserver, the operator in process as an
// identity holding exactly OPERATOR_RULES: FlowLogAggregator "default" beside Installation
// "default" makes netplug-flows in netplug-system (its account, the tokenreviews role, Service and
// Deployment, with the spec's window) and turns netplug-node's flow logs on; Available once the
// Deployment reports ready; a spec netplug-flows cannot use is Degraded naming the field; deleting
// it removes them and turns the flow logs off; without the Installation it is Degraded and its
// objects go. FlowViewer "default" runs netplug-flow-viewer beside it (Degraded, NoAggregator,
// without one; NoInstallation without the Installation, its objects gone). Another name is refused by the
// API server for both kinds. No kubelet and no controller manager run: the Deployment's status is
// what the test reports for it.
import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import {
  type Cluster,
  type Condition,
  condition,
  createInstallation,
  IMAGE,
  readDaemonSet,
  removeInstallation,
  SYSTEM,
  startCluster,
} from './helpers.ts';

const shared = sharedTeardowns(test);
let cluster: Cluster;

test.before(async () => {
  cluster = await startCluster(shared);
});

const GROUP = 'operator.projectnet.org';
const aggregatorRef = (name = 'default') => ({ group: GROUP, version: 'v1', plural: 'flowlogaggregators', name });
const viewerRef = (name = 'default') => ({ group: GROUP, version: 'v1', plural: 'flowviewers', name });
type Flows = { metadata: { generation?: number }; status?: { observedGeneration?: number; conditions?: Condition[] } };

const create = (ref: ReturnType<typeof aggregatorRef>, kind: string, spec: object) =>
  cluster.custom.createClusterCustomObject({
    group: ref.group,
    version: ref.version,
    plural: ref.plural,
    body: { apiVersion: `${GROUP}/v1`, kind, metadata: { name: ref.name }, spec },
  });
const read = async (ref: ReturnType<typeof aggregatorRef>) =>
  (await cluster.custom.getClusterCustomObject(ref).catch(() => undefined)) as Flows | undefined;
/** The client's typed objects as plain data, to compare. */
const plain = <T>(value: T): T => JSON.parse(JSON.stringify(value));
const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

const env = (container: k8s.V1Container | undefined) =>
  Object.fromEntries((container?.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
const agentEnv = async () => env((await readDaemonSet(cluster)).spec?.template.spec?.containers[0]);
const readFlowsDeployment = () =>
  cluster.apps.readNamespacedDeployment({ name: 'netplug-flows', namespace: SYSTEM }).catch(() => undefined);
/** netplug-flows' objects that exist, as `Kind name`. */
async function flowsObjects(): Promise<string[]> {
  const name = 'netplug-flows';
  const found = await Promise.all(
    [
      cluster.kube.core.readNamespacedServiceAccount({ name, namespace: SYSTEM }).then(() => 'ServiceAccount'),
      cluster.kube.rbac.readClusterRole({ name }).then(() => 'ClusterRole'),
      cluster.kube.rbac.readClusterRoleBinding({ name }).then(() => 'ClusterRoleBinding'),
      cluster.kube.core.readNamespacedService({ name, namespace: SYSTEM }).then(() => 'Service'),
      readFlowsDeployment().then((d) => (d ? 'Deployment' : undefined)),
    ].map((read) => read.catch(() => undefined)),
  );
  return found.filter((kind): kind is string => kind !== undefined);
}
const ALL = ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Service', 'Deployment'];
const VIEWER = 'netplug-flow-viewer';
/** netplug-flow-viewer's objects that exist, as `Kind`. */
async function viewerObjects(): Promise<string[]> {
  const found = await Promise.all(
    [
      cluster.kube.core.readNamespacedServiceAccount({ name: VIEWER, namespace: SYSTEM }).then(() => 'ServiceAccount'),
      cluster.kube.core.readNamespacedService({ name: VIEWER, namespace: SYSTEM }).then(() => 'Service'),
      cluster.apps.readNamespacedDeployment({ name: VIEWER, namespace: SYSTEM }).then(() => 'Deployment'),
    ].map((read) => read.catch(() => undefined)),
  );
  return found.filter((kind): kind is string => kind !== undefined);
}

test.serial('another name than default is refused by the API server for both kinds', async (t) => {
  const refused = async (promise: Promise<unknown>) => {
    const err = await t.throwsAsync(promise);
    return `${(err as { code?: number }).code} ${(err as { body?: string }).body ?? err?.message}`;
  };
  t.regex(
    await refused(create(aggregatorRef('other'), 'FlowLogAggregator', {})),
    /422[\s\S]*only the FlowLogAggregator named \\?"default\\?"/,
  );
  t.regex(await refused(create(viewerRef('other'), 'FlowViewer', {})), /422[\s\S]*only the FlowViewer named \\?"default\\?"/);
});

test.serial(
  'FlowLogAggregator default: netplug-flows in netplug-system and flow logs on netplug-node; Available when ready; deleted: both gone; FlowViewer default: the viewer beside it',
  async (t) => {
    const logFrom = cluster.log.length;
    t.teardown(async () => {
      if (!t.passed) t.log(cluster.log.slice(logFrom).join('\n'));
      for (const ref of [aggregatorRef(), viewerRef()]) await cluster.custom.deleteClusterCustomObject(ref).catch(() => undefined);
      await removeInstallation(cluster);
    });
    await createInstallation(cluster, { calicoNetwork: { ipPools: [{ cidr: '10.244.0.0/16' }] } });
    await eventually('the DaemonSet', async () => Boolean(await readDaemonSet(cluster).catch(() => undefined)));
    t.false('NETPLUG_FLOW_LOGS' in (await agentEnv()), 'no flow logs without a FlowLogAggregator');

    // The viewer before the aggregator: nothing to show, and it says so.
    await create(viewerRef(), 'FlowViewer', {});
    const noAggregator = await eventually('the FlowViewer status', async () => condition(await read(viewerRef()), 'Degraded'));
    t.like(noAggregator, { status: 'True', reason: 'NoAggregator' });
    t.regex(noAggregator.message, /there is no FlowLogAggregator "default": the viewer shows the flow logs it collects/);
    t.deepEqual(await viewerObjects(), []);

    await create(aggregatorRef(), 'FlowLogAggregator', { retention: '30m', maxBytes: '8Mi', flushInterval: 5 });
    await eventually('netplug-flows', async () => (await flowsObjects()).length === ALL.length);
    const deployment = (await readFlowsDeployment()) as k8s.V1Deployment;
    const [container] = deployment.spec?.template.spec?.containers ?? [];
    t.is(container?.image, IMAGE);
    t.like(env(container), {
      NETPLUG_FLOWS_WRITERS: 'netplug-system:netplug-node',
      NETPLUG_FLOWS_RETENTION: '30m',
      NETPLUG_FLOWS_MAX_BYTES: '8Mi',
    });
    t.is(deployment.metadata?.labels?.['app.kubernetes.io/managed-by'], 'netplug-operator');
    const role = await cluster.kube.rbac.readClusterRole({ name: 'netplug-flows' });
    t.deepEqual(plain(role.rules), [{ apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] }]);
    const binding = await cluster.kube.rbac.readClusterRoleBinding({ name: 'netplug-flows' });
    t.deepEqual(plain(binding.subjects), [{ kind: 'ServiceAccount', name: 'netplug-flows', namespace: SYSTEM }]);
    t.deepEqual(
      (await cluster.kube.core.readNamespacedService({ name: 'netplug-flows', namespace: SYSTEM })).spec?.ports?.map((p) => p.port),
      [9445],
    );

    // netplug-node sends to it: the env, and the projected token mounted.
    await eventually('flow logs on netplug-node', async () => (await agentEnv())['NETPLUG_FLOW_LOGS'] === 'true');
    t.like(await agentEnv(), {
      NETPLUG_FLOW_LOGS_INTERVAL: '5',
      NETPLUG_FLOW_LOGS_AGGREGATOR: 'http://$(NETPLUG_FLOWS_SERVICE_HOST):9445',
      NETPLUG_FLOW_LOGS_TOKEN_FILE: '/var/run/secrets/netplug-flows/token',
    });
    const pod = (await readDaemonSet(cluster)).spec?.template.spec;
    t.deepEqual(plain(pod?.volumes?.find((v) => v.name === 'flows-token')?.projected?.sources?.[0]?.serviceAccountToken), {
      audience: 'netplug-flows',
      expirationSeconds: 3600,
      path: 'token',
    });
    t.true(pod?.containers[0]?.volumeMounts?.some((m) => m.name === 'flows-token'));

    // Not yet available: its controller has not seen the Deployment (none runs here); then ready.
    await eventually('Progressing', async () => condition(await read(aggregatorRef()), 'Progressing')?.status === 'True');
    t.like(condition(await read(aggregatorRef()), 'Available'), { status: 'False', reason: 'RolloutPending' });
    t.regex(condition(await read(aggregatorRef()), 'Available')?.message ?? '', /Deployment netplug-flows has not been rolled out yet/);
    await cluster.apps.patchNamespacedDeploymentStatus(
      {
        name: 'netplug-flows',
        namespace: SYSTEM,
        body: {
          status: {
            observedGeneration: deployment.metadata?.generation,
            replicas: 1,
            updatedReplicas: 1,
            readyReplicas: 1,
            availableReplicas: 1,
          },
        },
      },
      merge,
    );
    await eventually('Available', async () => condition(await read(aggregatorRef()), 'Available')?.status === 'True');
    const available = (await read(aggregatorRef())) as Flows;
    t.like(condition(available, 'Available'), { reason: 'AllObjectsAvailable' });
    t.is(available.status?.observedGeneration, available.metadata.generation);

    // The viewer, now that netplug-flows exists: its objects, the operator's; Available once ready.
    await eventually('netplug-flow-viewer', async () => (await viewerObjects()).length === 3);
    const viewerDeployment = await cluster.apps.readNamespacedDeployment({ name: VIEWER, namespace: SYSTEM });
    t.is(viewerDeployment.spec?.template.spec?.containers[0]?.image, IMAGE);
    t.is(viewerDeployment.metadata?.labels?.['app.kubernetes.io/managed-by'], 'netplug-operator');
    t.is(env((await readFlowsDeployment())?.spec?.template.spec?.containers[0])['NETPLUG_FLOWS_READERS'], `${SYSTEM}:${VIEWER}`);
    await eventually('the viewer Progressing', async () => condition(await read(viewerRef()), 'Available')?.reason === 'RolloutPending');
    t.like(condition(await read(viewerRef()), 'Degraded'), { status: 'False' });
    await cluster.apps.patchNamespacedDeploymentStatus(
      {
        name: VIEWER,
        namespace: SYSTEM,
        body: {
          status: {
            observedGeneration: viewerDeployment.metadata?.generation,
            replicas: 1,
            updatedReplicas: 1,
            readyReplicas: 1,
            availableReplicas: 1,
          },
        },
      },
      merge,
    );
    await eventually('the viewer Available', async () => condition(await read(viewerRef()), 'Available')?.status === 'True');

    // A window netplug-flows would refuse: Degraded naming the field; what runs is kept.
    await cluster.custom.patchClusterCustomObject({ ...aggregatorRef(), body: { spec: { retention: '0s' } } }, merge);
    await eventually('Degraded', async () => condition(await read(aggregatorRef()), 'Degraded')?.status === 'True');
    t.like(condition(await read(aggregatorRef()), 'Degraded'), { reason: 'InvalidConfiguration' });
    t.regex(condition(await read(aggregatorRef()), 'Degraded')?.message ?? '', /spec\.retention "0s" must be at least 1 s/);
    t.is(env((await readFlowsDeployment())?.spec?.template.spec?.containers[0])['NETPLUG_FLOWS_RETENTION'], '30m');

    // Deleted: netplug-flows goes, and netplug-node's flow logs with it, and the viewer.
    await cluster.custom.deleteClusterCustomObject(aggregatorRef());
    await eventually('netplug-flows removed', async () => (await flowsObjects()).length === 0);
    await eventually('the viewer removed', async () => (await viewerObjects()).length === 0);
    t.like(condition(await read(viewerRef()), 'Degraded'), { status: 'True', reason: 'NoAggregator' });
    await eventually('flow logs off', async () => !('NETPLUG_FLOW_LOGS' in (await agentEnv())));
    const off = (await readDaemonSet(cluster)).spec?.template.spec;
    t.false(off?.volumes?.some((v) => v.name === 'flows-token'));
    t.false(Object.keys(await agentEnv()).some((name) => name.startsWith('NETPLUG_FLOW_LOGS')));
  },
);

test.serial('without Installation default a FlowLogAggregator and a FlowViewer are Degraded, and what they made goes', async (t) => {
  t.teardown(async () => {
    await cluster.custom.deleteClusterCustomObject(viewerRef()).catch(() => undefined);
    await cluster.custom.deleteClusterCustomObject(aggregatorRef()).catch(() => undefined);
    await removeInstallation(cluster);
  });
  await create(aggregatorRef(), 'FlowLogAggregator', {});
  await create(viewerRef(), 'FlowViewer', {});
  await eventually('NoInstallation', async () => condition(await read(aggregatorRef()), 'Degraded')?.reason === 'NoInstallation');
  await eventually('the viewer NoInstallation', async () => condition(await read(viewerRef()), 'Degraded')?.reason === 'NoInstallation');
  t.regex(
    condition(await read(viewerRef()), 'Degraded')?.message ?? '',
    /netplug-flow-viewer runs beside netplug installed by the operator/,
  );
  t.deepEqual(await flowsObjects(), []);
  t.deepEqual(await viewerObjects(), []);

  await createInstallation(cluster, { calicoNetwork: { ipPools: [{ cidr: '10.244.0.0/16' }] } });
  await eventually('netplug-flows', async () => (await flowsObjects()).length === ALL.length);
  await eventually('netplug-flow-viewer', async () => (await viewerObjects()).length === 3);
  t.like(condition(await read(aggregatorRef()), 'Degraded'), { status: 'False' });
  await eventually('flow logs on netplug-node, every 15 s', async () => (await agentEnv())['NETPLUG_FLOW_LOGS_INTERVAL'] === '15');

  // The Installation deleted: its clean-up and the two reconciles remove netplug-flows and the viewer.
  await removeInstallation(cluster);
  await eventually('netplug-flows removed', async () => (await flowsObjects()).length === 0);
  await eventually('the viewer removed', async () => (await viewerObjects()).length === 0);
  await eventually('the Degraded message', async () =>
    /there is no Installation "default": netplug-flows runs beside/.test(condition(await read(aggregatorRef()), 'Degraded')?.message ?? ''),
  );
  await eventually('the viewer Degraded message', async () =>
    /there is no Installation "default": netplug-flow-viewer runs beside/.test(
      condition(await read(viewerRef()), 'Degraded')?.message ?? '',
    ),
  );
});
