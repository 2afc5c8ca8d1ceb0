// netplug-operator in process against a real kube-apiserver, as an identity holding exactly
// OPERATOR_RULES: an Installation is defaulted (written back), validated, and made into pools and
// netplug-system's objects by server-side apply; a change converges (a new template rolls the
// DaemonSet by its hash); a bad Installation is Degraded naming the field and changes nothing that
// runs; deleting it removes what the operator made, the CNI plugin's credentials only once no
// node pod remains, and keeps the pools. No kubelet runs: workloads stay unavailable.
import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { newBlock } from '../../ts/ipam/block.ts';
import { keys } from '../../ts/ipam/model.ts';
import { configHash } from '../../ts/operator/render-cni-config.ts';
import { openStore } from '../../ts/store/open.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import {
  type Cluster,
  condition,
  createInstallation,
  eventually,
  finalizeSystemNamespace,
  IMAGE,
  type InstallationObject,
  patchInstallation,
  poolRef,
  readInstallation,
  readTable,
  removeInstallation,
  startCluster,
  statusOf,
} from './helpers.ts';

const shared = sharedTeardowns(test);
let cluster: Cluster;

test.before(async () => {
  cluster = await startCluster(shared);
});

const SYSTEM = 'netplug-system';
type Pool = { metadata: { name: string; labels?: Record<string, string> }; spec: { spec: Record<string, unknown> } };

const configMap = () => cluster.kube.core.readNamespacedConfigMap({ name: 'cni-config', namespace: SYSTEM });
const conflist = async () => JSON.parse((await configMap()).data?.['config'] ?? '{}');
const daemonSet = () => cluster.apps.readNamespacedDaemonSet({ name: 'netplug-node', namespace: SYSTEM });
const readPool = async (name: string) =>
  (await cluster.custom.getClusterCustomObject(poolRef(name)).catch(() => undefined)) as Pool | undefined;
const readStatus = async (name: string) =>
  (await cluster.custom.getClusterCustomObject(statusOf(name)).catch(() => undefined)) as { status?: { conditions?: never[] } } | undefined;
const env = (container: k8s.V1Container | undefined) =>
  Object.fromEntries((container?.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
const hashOf = (ds: k8s.V1DaemonSet) => ds.spec?.template.metadata?.annotations?.['hash.operator.projectnet.org/cni-config'];

test.serial(
  'an Installation with one pool: defaults written back, the pool, every object by server-side apply, conditions; a change rolls the DaemonSet',
  async (t) => {
    t.teardown(() => removeInstallation(cluster));
    await createInstallation(cluster, { calicoNetwork: { ipPools: [{ cidr: '10.244.0.0/16' }] } });

    await eventually('the defaults written back', async () => (await readInstallation(cluster))?.spec.cni?.type === 'Netplug');
    const written = (await readInstallation(cluster)) as InstallationObject;
    t.deepEqual(written.metadata.finalizers, ['projectnet.org/operator-cleanup']);
    t.deepEqual(written.spec.cni, { type: 'Netplug', ipam: { type: 'Netplug' }, binDir: '/opt/cni/bin', confDir: '/etc/cni/net.d' });
    t.like(written.spec.calicoNetwork, { hostPorts: 'Enabled', linuxPolicySetupTimeoutSeconds: 0 });
    t.deepEqual(written.spec.calicoNetwork.ipPools, [
      {
        cidr: '10.244.0.0/16',
        name: 'default-ipv4-ippool',
        encapsulation: 'None',
        natOutgoing: 'Enabled',
        nodeSelector: 'all()',
        blockSize: 26,
        disableNewAllocations: false,
      },
    ]);

    await eventually('the pool', async () => (await readPool('default-ipv4-ippool')) !== undefined);
    const pool = (await readPool('default-ipv4-ippool')) as Pool;
    t.is(pool.metadata.labels?.['app.kubernetes.io/managed-by'], 'netplug-operator');
    t.like(pool.spec.spec, {
      cidr: '10.244.0.0/16',
      blockSize: 26,
      natOutgoing: true,
      ipipMode: 'Never',
      vxlanMode: 'Never',
      disabled: false,
    });
    // The pool is one netplug's datastore reads, as netplugctl would have written it.
    const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: cluster.kube.server.admin.kubeconfig } });
    t.teardown(() => store.close());
    t.is((await store.get<{ spec: { cidr: string } }>(keys.pool('default-ipv4-ippool')))?.value.spec.cidr, '10.244.0.0/16');

    await eventually('the DaemonSet', async () => Boolean(await daemonSet()));
    const ds = await daemonSet();
    const [agent, installer] = ds.spec?.template.spec?.containers ?? [];
    t.is(agent?.image, IMAGE);
    t.like(env(agent), { DATASTORE_TYPE: 'kubernetes', NO_DEFAULT_POOLS: 'true' });
    t.false('USE_POD_CIDR' in env(agent));
    t.like(env(installer), { NETPLUG_CONFIG_MAP: 'cni-config', NETPLUG_CONFIG_MAP_KEY: 'config', CNI_NET_DIR: '/etc/cni/net.d' });
    t.is(hashOf(ds), configHash((await configMap()).data ?? {}));
    t.true(ds.metadata?.managedFields?.some((f) => f.manager === 'netplug-operator' && f.operation === 'Apply'));
    const [netplug, portmap] = (await conflist()).plugins;
    t.like(netplug, {
      type: 'netplug',
      datastore_type: 'kubernetes',
      policy_setup_timeout_seconds: 0,
      ipam: { type: 'netplug-ipam', assign_ipv4: 'true', assign_ipv6: 'false' },
    });
    t.is(portmap.type, 'portmap');
    t.truthy(await cluster.apps.readNamespacedDeployment({ name: 'netplug-kube-controllers', namespace: SYSTEM }));
    for (const name of ['netplug-node', 'netplug-cni-plugin', 'netplug-kube-controllers']) {
      t.truthy(await cluster.kube.core.readNamespacedServiceAccount({ name, namespace: SYSTEM }));
      t.truthy(await cluster.kube.rbac.readClusterRole({ name }));
    }

    // No kubelet: the DaemonSet never becomes available, so the Installation stays Progressing, without a version.
    await eventually('the conditions', async () => condition(await readInstallation(cluster), 'Progressing')?.status === 'True');
    const status = (await readInstallation(cluster))?.status;
    t.like(condition({ status }, 'Available'), { status: 'False' });
    t.like(condition({ status }, 'Degraded'), { status: 'False' });
    t.is(status?.netplugVersion, undefined);
    t.is(status?.mtu, 0);
    t.is(status?.computed.cni.ipam.type, 'Netplug');
    await eventually(
      'NetplugStatus netplug and ippools',
      async () => condition(await readStatus('ippools'), 'Available')?.status === 'True',
    );
    t.like(condition(await readStatus('netplug'), 'Progressing'), { status: 'True' });
    t.regex(condition(await readStatus('netplug'), 'Progressing')?.message ?? '', /DaemonSet netplug-node has not been rolled out yet/);

    // kubectl get netplugstatuses: a row per component with its conditions.
    const table = await readTable(cluster, '/apis/operator.projectnet.org/v1/netplugstatuses');
    t.deepEqual(table.columns, ['Name', 'Available', 'Progressing', 'Degraded', 'Since']);
    t.deepEqual(
      table.rows.map((row) => row.slice(0, 4)),
      [
        ['ippools', 'True', 'False', 'False'],
        ['netplug', 'False', 'True', 'False'],
      ],
    );

    // A change converges: a new template, a new hash, so the DaemonSet rolls.
    const before = hashOf(ds);
    await patchInstallation(cluster, { spec: { calicoNetwork: { linuxPolicySetupTimeoutSeconds: 10 } } });
    await eventually('the new template', async () => (await conflist()).plugins[0].policy_setup_timeout_seconds === 10);
    await eventually(
      'the new hash on the pod template',
      async () => hashOf(await daemonSet()) === configHash((await configMap()).data ?? {}),
    );
    t.not(hashOf(await daemonSet()), before);

    // HostLocal: host-local with the node's pod CIDR, and USE_POD_CIDR on netplug-node.
    await patchInstallation(cluster, { spec: { cni: { ipam: { type: 'HostLocal' } } } });
    await eventually('host-local', async () => (await conflist()).plugins[0].ipam.type === 'host-local');
    t.deepEqual((await conflist()).plugins[0].ipam, { type: 'host-local', subnet: 'usePodCidr' });
    await eventually('USE_POD_CIDR', async () => env((await daemonSet()).spec?.template.spec?.containers[0]).USE_POD_CIDR === 'true');
  },
);

test.serial(
  'Available once the workloads report every pod ready: netplugVersion written; a change makes it Progressing again, the version kept',
  async (t) => {
    t.teardown(() => removeInstallation(cluster));
    await cluster.kube.core.createNamespacedConfigMap({
      namespace: 'kube-system',
      body: { metadata: { name: 'kubeadm-config' }, data: { ClusterConfiguration: 'networking:\n  podSubnet: 10.250.0.0/16\n' } },
    });
    t.teardown(() => cluster.kube.core.deleteNamespacedConfigMap({ name: 'kubeadm-config', namespace: 'kube-system' }));
    await createInstallation(cluster, {});
    await eventually(
      "the pool from kubeadm's podSubnet",
      async () => (await readPool('default-ipv4-ippool'))?.spec.spec['cidr'] === '10.250.0.0/16',
    );
    await eventually('the workloads', async () =>
      Boolean(await cluster.apps.readNamespacedDeployment({ name: 'netplug-kube-controllers', namespace: SYSTEM }).catch(() => undefined)),
    );
    // What the DaemonSet and Deployment controllers would report with one node, all ready (no controller manager runs here).
    const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
    const reportReady = async () => {
      const ds = await daemonSet();
      await cluster.apps.patchNamespacedDaemonSetStatus(
        {
          name: 'netplug-node',
          namespace: SYSTEM,
          body: {
            status: {
              observedGeneration: ds.metadata?.generation,
              desiredNumberScheduled: 1,
              currentNumberScheduled: 1,
              updatedNumberScheduled: 1,
              numberMisscheduled: 0,
              numberReady: 1,
              numberAvailable: 1,
            },
          },
        },
        merge,
      );
      const deployment = await cluster.apps.readNamespacedDeployment({ name: 'netplug-kube-controllers', namespace: SYSTEM });
      await cluster.apps.patchNamespacedDeploymentStatus(
        {
          name: 'netplug-kube-controllers',
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
    };
    await reportReady();
    await eventually('Available', async () => condition(await readInstallation(cluster), 'Available')?.status === 'True');
    t.is((await readInstallation(cluster))?.status?.netplugVersion, NETPLUG_VERSION);
    t.like(condition(await readStatus('netplug'), 'Available'), { status: 'True' });
    t.like(condition(await readStatus('netplug'), 'Progressing'), { status: 'False' });

    // A new MTU: a new template and hash, so a new generation the controller has not seen: Progressing, the version kept.
    await patchInstallation(cluster, { spec: { calicoNetwork: { mtu: 1400 } } });
    await eventually('Progressing again', async () => condition(await readInstallation(cluster), 'Progressing')?.status === 'True');
    t.is((await conflist()).plugins[0].mtu, 1400);
    t.is((await readInstallation(cluster))?.status?.mtu, 1400);
    t.is((await readInstallation(cluster))?.status?.netplugVersion, NETPLUG_VERSION);
    await reportReady();
    await eventually('Available again', async () => condition(await readInstallation(cluster), 'Available')?.status === 'True');

    // A listed pool outside the cluster's pod CIDR is refused.
    await patchInstallation(cluster, { spec: { calicoNetwork: { ipPools: [{ cidr: '10.99.0.0/16' }] } } });
    await eventually('Degraded', async () =>
      /must lie within the cluster's pod CIDR \(10\.250\.0\.0\/16\)/.test(
        condition(await readInstallation(cluster), 'Degraded')?.message ?? '',
      ),
    );
  },
);

test.serial(
  'a bad Installation is Degraded naming the field and value, and nothing that runs changes; so are disagreeing aliases',
  async (t) => {
    t.teardown(() => removeInstallation(cluster));
    await createInstallation(cluster, { calicoNetwork: { ipPools: [{ cidr: '10.245.0.0/16' }] } });
    await eventually(
      'the objects',
      async () =>
        Boolean(await daemonSet().catch(() => undefined)) && condition(await readInstallation(cluster), 'Progressing')?.status === 'True',
    );
    const [cm, ds] = [await configMap(), await daemonSet()];

    await patchInstallation(cluster, {
      spec: {
        calicoNetwork: {
          linuxPolicySetupTimeoutSeconds: 5,
          ipPools: [{ cidr: '10.245.0.0/16', name: 'default-ipv4-ippool' }, { cidr: '10.0.0.300/16' }],
        },
      },
    });
    await eventually('Degraded', async () => condition(await readInstallation(cluster), 'Degraded')?.status === 'True');
    const degraded = condition(await readInstallation(cluster), 'Degraded');
    t.is(degraded?.reason, 'InvalidConfiguration');
    t.regex(degraded?.message ?? '', /spec\.calicoNetwork\.ipPools\[1\]\.cidr "10\.0\.0\.300\/16" is not a CIDR/);
    t.like(condition(await readStatus('netplug'), 'Degraded'), { status: 'True', reason: 'InvalidConfiguration' });
    t.is((await configMap()).metadata?.resourceVersion, cm.metadata?.resourceVersion, 'the template is unchanged');
    t.is((await daemonSet()).metadata?.resourceVersion, ds.metadata?.resourceVersion, 'the DaemonSet is unchanged');
    t.is((await readInstallation(cluster))?.spec.calicoNetwork.ipPools[1].name, undefined, 'no defaults written into a bad spec');

    await patchInstallation(cluster, {
      spec: { calicoNetwork: { ipPools: [{ cidr: '10.245.0.0/16', name: 'default-ipv4-ippool' }], cni: { ipam: { type: 'HostLocal' } } } },
    });
    await eventually('the aliases refused', async () =>
      /disagree/.test(condition(await readInstallation(cluster), 'Degraded')?.message ?? ''),
    );
    t.regex(
      condition(await readInstallation(cluster), 'Degraded')?.message ?? '',
      /spec\.cni\.ipam\.type "Netplug" and spec\.calicoNetwork\.cni\.ipam\.type "HostLocal" disagree/,
    );
    t.is((await configMap()).metadata?.resourceVersion, cm.metadata?.resourceVersion);

    // Fixed: Degraded clears, the timeout applies.
    await patchInstallation(cluster, { spec: { calicoNetwork: { cni: null } } });
    await eventually('no longer Degraded', async () => condition(await readInstallation(cluster), 'Degraded')?.status === 'False');
    await eventually('the timeout', async () => (await conflist()).plugins[0].policy_setup_timeout_seconds === 5);
  },
);

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
        spec: { cidr, blockSize: 26, nodeSelector: 'all()', ipipMode: 'Never', vxlanMode: 'Never', natOutgoing, disabled: false },
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
      async () => (await readPool('equal'))?.metadata.labels?.['app.kubernetes.io/managed-by'] === 'netplug-operator',
    );
    await eventually('the third created', async () => (await readPool('third')) !== undefined);
    await eventually('ippools Degraded', async () => condition(await readStatus('ippools'), 'Degraded')?.status === 'True');
    t.regex(
      condition(await readStatus('ippools'), 'Degraded')?.message ?? '',
      /cannot update IP pool "other" \(10\.60\.0\.0\/16\): it is not owned by the operator/,
    );
    t.regex(
      condition(await readStatus('ippools'), 'Degraded')?.message ?? '',
      /IP pool "narrow" \(10\.80\.0\.0\/24\) overlaps IP pool "wide" \(10\.80\.0\.0\/16\)/,
    );
    t.is(await readPool('narrow'), undefined);
    t.is((await readPool('other'))?.metadata.labels?.['app.kubernetes.io/managed-by'], undefined);
    t.is((await readPool('other'))?.spec.spec['natOutgoing'], false, 'the foreign pool is left as it is');

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
    await eventually('third disabled', async () => (await readPool('third'))?.spec.spec['disabled'] === true);
    await eventually('ippools Progressing with the holder count', async () =>
      /IP pool "third" is disabled and drains: 1 address still allocated/.test(
        condition(await readStatus('ippools'), 'Progressing')?.message ?? '',
      ),
    );
    t.like(condition(await readStatus('ippools'), 'Degraded'), { status: 'False' }, 'the foreign pool now agrees: adopted');
    t.truthy(await readPool('third'));
    // The address released (its block emptied): the pool goes, with its empty block.
    const stored = await store.get(keys.block('10.70.0.0/26'));
    t.true(await store.commit([{ key: keys.block('10.70.0.0/26'), remove: true, revision: stored?.revision ?? '' }]));
    t.true(await store.commit([{ key: keys.block('10.70.0.0/26'), create: newBlock('10.70.0.0/26', 'host:node-a', new Date()) }]));
    await eventually('third deleted', async () => (await readPool('third')) === undefined);
    t.is(await store.get(keys.block('10.70.0.0/26')), undefined, 'its empty block went with it');
    await eventually('ippools Available', async () => condition(await readStatus('ippools'), 'Available')?.status === 'True');
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
      async () => condition(await readStatus('netplug'), 'Degraded')?.reason === 'PodFailure',
    );
    t.regex(
      condition(await readStatus('netplug'), 'Degraded')?.message ?? '',
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
      async () => (await daemonSet().catch(() => undefined)) === undefined && (await configMap().catch(() => undefined)) === undefined,
    );
    await eventually('the operator to wait for the pod', () =>
      cluster.log.some((line) => /waiting for 1 netplug-node pod to stop/.test(line)),
    );
    t.truthy(await cluster.kube.rbac.readClusterRole({ name: 'netplug-cni-plugin' }), 'the CNI credentials stay while a node pod remains');
    t.truthy(await readInstallation(cluster), 'the finalizer holds the Installation');

    await cluster.kube.core.deleteNamespacedPod({ name: 'netplug-node-x', namespace: SYSTEM, gracePeriodSeconds: 0 });
    await eventually('the Installation gone', async () => (await readInstallation(cluster)) === undefined);
    for (const name of ['netplug-node', 'netplug-cni-plugin', 'netplug-kube-controllers'])
      t.is(await cluster.kube.rbac.readClusterRole({ name }).catch(() => undefined), undefined, name);
    // No namespace controller runs here: the namespace stays Terminating (the test finalizes it below).
    t.truthy((await cluster.kube.core.readNamespace({ name: SYSTEM })).metadata?.deletionTimestamp, 'netplug-system is being deleted');
    t.truthy(await readPool('default-ipv4-ippool'), 'the pool is kept');
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
      metadata: { name: 'flowlogaggregators.operator.projectnet.org' },
      spec: {
        group: 'operator.projectnet.org',
        scope: 'Cluster',
        names: { kind: 'FlowLogAggregator', plural: 'flowlogaggregators', singular: 'flowlogaggregator' },
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
  t.teardown(() => cluster.extensions.deleteCustomResourceDefinition({ name: 'flowlogaggregators.operator.projectnet.org' }));
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
