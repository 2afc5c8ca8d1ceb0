// netplug-operator's IP pools and clean-up, in process against a real kube-apiserver as an
// identity holding exactly OPERATOR_RULES: a same-CIDR pool that agrees is adopted, one that does
// not (or overlaps) is refused; a pool removed from the Installation is disabled and deleted only
// once empty; deleting the Installation removes what the operator made, the CNI plugin's
// credentials and the admission policy of the address annotations only once no node pod remains,
// and keeps the pools; other Installations and unknown
// kinds of the group are no trouble.
import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { newBlock } from '../../ts/ipam/block.ts';
import { keys } from '../../ts/model/keys.ts';
import { ADDRESS_ANNOTATIONS_POLICY } from '../../ts/render/address-annotation-admission.ts';
import { openStore } from '../../ts/store/open.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import {
  type Cluster,
  condition,
  createInstallation,
  finalizeSystemNamespace,
  IMAGE,
  patchInstallation,
  readConfigMap,
  readDaemonSet,
  readInstallation,
  readPool,
  readStatus,
  removeInstallation,
  SYSTEM,
  startCluster,
} from './helpers.ts';

const shared = sharedTeardowns(test);
let cluster: Cluster;

/** The admission policy of the address annotations and its binding, as the API server holds them (undefined when absent). */
async function readAdmission(): Promise<[k8s.V1ValidatingAdmissionPolicy | undefined, k8s.V1ValidatingAdmissionPolicyBinding | undefined]> {
  const admission = cluster.kube.config.makeApiClient(k8s.AdmissionregistrationV1Api);
  const name = ADDRESS_ANNOTATIONS_POLICY;
  return [
    await admission.readValidatingAdmissionPolicy({ name }).catch(() => undefined),
    await admission.readValidatingAdmissionPolicyBinding({ name }).catch(() => undefined),
  ];
}

test.before(async () => {
  cluster = await startCluster(shared);
});

test.serial(
  'pools: an equal pool adopted, a foreign one with the CIDR refused, an overlapping one refused, a removed one disabled and deleted only once empty',
  async (t) => {
    t.teardown(() => removeInstallation(cluster));
    const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: cluster.kube.server.admin.kubeconfig } });
    t.teardown(() => store.close());
    const foreign = (name: string, cidr: string, natOutgoing: boolean) => ({
      key: keys.pool(name),
      create: {
        kind: 'IPPool',
        apiVersion: 'projectnet.org/v3',
        metadata: { name, creationTimestamp: new Date().toISOString() },
        spec: { cidr, blockSize: 26, nodeSelector: 'all()', ipipMode: 'Never', vxlanMode: 'CrossSubnet', natOutgoing, disabled: false },
      },
    });
    t.true(
      await store.commit([
        foreign('equal', '10.50.0.0/16', true),
        foreign('other', '10.60.0.0/16', false),
        foreign('wide', '10.80.0.0/16', true),
      ]),
    );
    await createInstallation(cluster, {
      calicoNetwork: {
        ipPools: [
          { cidr: '10.50.0.0/16', name: 'equal' },
          { cidr: '10.60.0.0/16', name: 'other' },
          { cidr: '10.70.0.0/16', name: 'third' },
          { cidr: '10.80.0.0/24', name: 'narrow' },
        ],
      },
    });
    await eventually(
      'the equal pool adopted',
      async () => (await readPool(cluster, 'equal'))?.metadata.labels?.['app.kubernetes.io/managed-by'] === 'netplug-operator',
    );
    await eventually('the third created', async () => (await readPool(cluster, 'third')) !== undefined);
    await eventually('ippools Degraded', async () => condition(await readStatus(cluster, 'ippools'), 'Degraded')?.status === 'True');
    t.regex(
      condition(await readStatus(cluster, 'ippools'), 'Degraded')?.message ?? '',
      /cannot update IP pool "other" \(10\.60\.0\.0\/16\): it is not owned by the operator/,
    );
    t.regex(
      condition(await readStatus(cluster, 'ippools'), 'Degraded')?.message ?? '',
      /IP pool "narrow" \(10\.80\.0\.0\/24\) overlaps IP pool "wide" \(10\.80\.0\.0\/16\)/,
    );
    t.is(await readPool(cluster, 'narrow'), undefined);
    t.is((await readPool(cluster, 'other'))?.metadata.labels?.['app.kubernetes.io/managed-by'], undefined);
    t.is((await readPool(cluster, 'other'))?.spec.spec['natOutgoing'], false, 'the foreign pool is left as it is');

    // An address held in "third"; then "third" leaves the Installation: disabled, kept while it holds the address.
    const block = newBlock('10.70.0.0/26', 'host:node-a', new Date());
    block.allocations[0] = 0;
    block.unallocated = block.unallocated.filter((ordinal) => ordinal !== 0);
    block.attributes = [{ handle_id: 'k8s-pod-network.c1', secondary: {} }];
    t.true(await store.commit([{ key: keys.block('10.70.0.0/26'), create: block }]));
    await patchInstallation(cluster, {
      spec: {
        calicoNetwork: {
          ipPools: [
            { cidr: '10.50.0.0/16', name: 'equal' },
            { cidr: '10.60.0.0/16', name: 'other', natOutgoing: 'Disabled' },
          ],
        },
      },
    });
    await eventually('third disabled', async () => (await readPool(cluster, 'third'))?.spec.spec['disabled'] === true);
    await eventually('ippools Progressing with the holder count', async () =>
      /IP pool "third" is disabled and drains: 1 address still allocated/.test(
        condition(await readStatus(cluster, 'ippools'), 'Progressing')?.message ?? '',
      ),
    );
    t.like(condition(await readStatus(cluster, 'ippools'), 'Degraded'), { status: 'False' }, 'the foreign pool now agrees: adopted');
    t.truthy(await readPool(cluster, 'third'));
    // The address released (its block emptied): the pool goes, with its empty block.
    const stored = await store.get(keys.block('10.70.0.0/26'));
    t.true(await store.commit([{ key: keys.block('10.70.0.0/26'), remove: true, revision: stored?.revision ?? '' }]));
    t.true(await store.commit([{ key: keys.block('10.70.0.0/26'), create: newBlock('10.70.0.0/26', 'host:node-a', new Date()) }]));
    await eventually('third deleted', async () => (await readPool(cluster, 'third')) === undefined);
    // The pool and its empty block are two writes: wait for both.
    await eventually('its empty block went with it', async () => (await store.get(keys.block('10.70.0.0/26'))) === undefined);
    await eventually('ippools Available', async () => condition(await readStatus(cluster, 'ippools'), 'Available')?.status === 'True');
  },
);

test.serial(
  'deleting the Installation removes what the operator made, the CNI credentials only once no node pod remains; pools are kept',
  async (t) => {
    t.teardown(() => removeInstallation(cluster));
    await createInstallation(cluster, { calicoNetwork: { ipPools: [{ cidr: '10.246.0.0/16' }] } });
    await eventually('the objects', async () =>
      Boolean(await cluster.apps.readNamespacedDeployment({ name: 'netplug-kube-controllers', namespace: SYSTEM }).catch(() => undefined)),
    );
    const [policy, binding] = await readAdmission();
    t.is(policy?.spec?.failurePolicy, 'Fail');
    t.is(policy?.metadata?.labels?.['app.kubernetes.io/managed-by'], 'netplug-operator');
    t.deepEqual(binding?.spec?.validationActions, ['Deny']);
    t.is(binding?.spec?.policyName, ADDRESS_ANNOTATIONS_POLICY);
    // A node pod (no kubelet here: a pod object as the DaemonSet controller would make it).
    await cluster.kube.core.createNamespacedPod({
      namespace: SYSTEM,
      body: {
        metadata: { name: 'netplug-node-x', labels: { 'k8s-app': 'netplug-node' } },
        spec: { containers: [{ name: 'netplug-node', image: IMAGE }] },
      },
    });
    t.teardown(() => cluster.kube.core.deleteNamespacedPod({ name: 'netplug-node-x', namespace: SYSTEM }).catch(() => undefined));
    // A failing pod makes netplug Degraded, naming it (its status as a kubelet would report it).
    await cluster.kube.core.patchNamespacedPodStatus(
      {
        name: 'netplug-node-x',
        namespace: SYSTEM,
        body: {
          status: {
            containerStatuses: [
              {
                name: 'netplug-node',
                image: IMAGE,
                imageID: '',
                ready: false,
                restartCount: 3,
                state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 40s restarting failed container' } },
              },
            ],
          },
        },
      },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await eventually(
      'netplug Degraded by the failing pod',
      async () => condition(await readStatus(cluster, 'netplug'), 'Degraded')?.reason === 'PodFailure',
    );
    t.regex(
      condition(await readStatus(cluster, 'netplug'), 'Degraded')?.message ?? '',
      /pod netplug-system\/netplug-node-x container netplug-node: CrashLoopBackOff \(back-off 40s restarting failed container\)/,
    );

    await cluster.custom.deleteClusterCustomObject({
      group: 'operator.projectnet.org',
      version: 'v1',
      plural: 'installations',
      name: 'default',
    });
    await eventually(
      'the workloads and template gone',
      async () =>
        (await readDaemonSet(cluster).catch(() => undefined)) === undefined &&
        (await readConfigMap(cluster).catch(() => undefined)) === undefined,
    );
    await eventually('the operator to wait for the pod', () =>
      cluster.log.some((line) => /waiting for 1 netplug-node pod to stop/.test(line)),
    );
    t.truthy(await cluster.kube.rbac.readClusterRole({ name: 'netplug-cni-plugin' }), 'the CNI credentials stay while a node pod remains');
    t.true(
      (await readAdmission()).every((object) => object !== undefined),
      'the admission policy stays while a node pod (whose plugin honours the annotations) remains',
    );
    t.truthy(await readInstallation(cluster), 'the finalizer holds the Installation');

    await cluster.kube.core.deleteNamespacedPod({ name: 'netplug-node-x', namespace: SYSTEM, gracePeriodSeconds: 0 });
    await eventually('the Installation gone', async () => (await readInstallation(cluster)) === undefined);
    for (const name of ['netplug-node', 'netplug-cni-plugin', 'netplug-kube-controllers'])
      t.is(await cluster.kube.rbac.readClusterRole({ name }).catch(() => undefined), undefined, name);
    t.deepEqual(await readAdmission(), [undefined, undefined], 'the admission policy and its binding are removed');
    // No namespace controller runs here: the namespace stays Terminating (the test finalizes it below).
    t.truthy((await cluster.kube.core.readNamespace({ name: SYSTEM })).metadata?.deletionTimestamp, 'netplug-system is being deleted');
    t.truthy(await readPool(cluster, 'default-ipv4-ippool'), 'the pool is kept');
    await finalizeSystemNamespace(cluster);
  },
);

test.serial('an Installation not named default is Degraded saying so; unknown kinds of the group are no trouble', async (t) => {
  t.teardown(async () => {
    await cluster.custom
      .deleteClusterCustomObject({ group: 'operator.projectnet.org', version: 'v1', plural: 'installations', name: 'other' })
      .catch(() => undefined);
  });
  await cluster.extensions.createCustomResourceDefinition({
    body: {
      // A kind of the reference's operator that netplug's does not know.
      metadata: { name: 'apiservers.operator.projectnet.org' },
      spec: {
        group: 'operator.projectnet.org',
        scope: 'Cluster',
        names: { kind: 'APIServer', plural: 'apiservers', singular: 'apiserver' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } },
          },
        ],
      },
    },
  });
  t.teardown(() => cluster.extensions.deleteCustomResourceDefinition({ name: 'apiservers.operator.projectnet.org' }));
  await createInstallation(cluster, {}, 'other');
  await eventually('other Degraded', async () => condition(await readInstallation(cluster, 'other'), 'Degraded')?.status === 'True');
  t.like(condition(await readInstallation(cluster, 'other'), 'Degraded'), { reason: 'NotReconciled' });
  t.regex(
    condition(await readInstallation(cluster, 'other'), 'Degraded')?.message ?? '',
    /only the Installation named "default" is reconciled/,
  );
  t.false(
    cluster.log.some((line) => / ERROR /.test(line)),
    cluster.log.join('\n'),
  );
  if (process.env.OPERATOR_LOG) (await import('node:fs')).writeFileSync(process.env.OPERATOR_LOG, cluster.log.join('\n'));
});
