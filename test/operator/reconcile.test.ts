// netplug-operator in process against a real kube-apiserver, as an identity holding exactly
// OPERATOR_RULES: an Installation is defaulted (written back), validated, and made into pools and
// netplug-system's objects by server-side apply; a change converges (a new template rolls the
// DaemonSet by its hash); Available (and the version) once the workloads report ready; a bad
// Installation is Degraded naming the field and changes nothing that runs. No kubelet runs: the
// workloads' status is what the test reports for their controllers.
import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { keys } from '../../ts/model/keys.ts';
import { configHash } from '../../ts/operator/render-cni-config.ts';
import { openStore } from '../../ts/store/open.ts';
import { NETPLUG_VERSION } from '../../ts/version.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import {
  type Cluster,
  condition,
  createInstallation,
  IMAGE,
  installation,
  type InstallationObject,
  type Pool,
  patchInstallation,
  readConfigMap,
  readConflist,
  readDaemonSet,
  readInstallation,
  readPool,
  readStatus,
  readTable,
  reconciles,
  removeInstallation,
  SYSTEM,
  startCluster,
} from './helpers.ts';

const shared = sharedTeardowns(test);
let cluster: Cluster;

test.before(async () => {
  cluster = await startCluster(shared);
});

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
    t.deepEqual(written.spec.cni, {
      type: 'Netplug',
      ipam: { type: 'Netplug' },
      binDir: '/opt/cni/bin',
      confDir: '/etc/cni/net.d',
      fastPath: 'Enabled',
    });
    t.like(written.spec.calicoNetwork, { hostPorts: 'Enabled', linuxPolicySetupTimeoutSeconds: 0 });
    t.deepEqual(written.spec.calicoNetwork.ipPools, [
      {
        cidr: '10.244.0.0/16',
        name: 'default-ipv4-ippool',
        encapsulation: 'VXLANCrossSubnet',
        natOutgoing: 'Enabled',
        nodeSelector: 'all()',
        blockSize: 26,
        disableNewAllocations: false,
      },
    ]);

    await eventually('the pool', async () => (await readPool(cluster, 'default-ipv4-ippool')) !== undefined);
    const pool = (await readPool(cluster, 'default-ipv4-ippool')) as Pool;
    t.is(pool.metadata.labels?.['app.kubernetes.io/managed-by'], 'netplug-operator');
    t.like(pool.spec.spec, {
      cidr: '10.244.0.0/16',
      blockSize: 26,
      natOutgoing: true,
      ipipMode: 'Never',
      vxlanMode: 'CrossSubnet',
      disabled: false,
    });
    // The pool is one netplug's datastore reads, as netplugctl would have written it.
    const store = await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: cluster.kube.server.admin.kubeconfig } });
    t.teardown(() => store.close());
    t.is((await store.get<{ spec: { cidr: string } }>(keys.pool('default-ipv4-ippool')))?.value.spec.cidr, '10.244.0.0/16');

    await eventually('the DaemonSet', async () => Boolean(await readDaemonSet(cluster)));
    const ds = await readDaemonSet(cluster);
    const [agent, installer] = ds.spec?.template.spec?.containers ?? [];
    t.is(agent?.image, IMAGE);
    t.like(env(agent), { DATASTORE_TYPE: 'kubernetes', NO_DEFAULT_POOLS: 'true' });
    t.false('USE_POD_CIDR' in env(agent));
    t.like(env(installer), { NETPLUG_CONFIG_MAP: 'cni-config', NETPLUG_CONFIG_MAP_KEY: 'config', CNI_NET_DIR: '/etc/cni/net.d' });
    t.is(hashOf(ds), configHash((await readConfigMap(cluster)).data ?? {}));
    t.true(ds.metadata?.managedFields?.some((f) => f.manager === 'netplug-operator' && f.operation === 'Apply'));
    const [netplug, portmap] = (await readConflist(cluster)).plugins;
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
      async () => condition(await readStatus(cluster, 'ippools'), 'Available')?.status === 'True',
    );
    t.like(condition(await readStatus(cluster, 'netplug'), 'Progressing'), { status: 'True' });
    t.regex(
      condition(await readStatus(cluster, 'netplug'), 'Progressing')?.message ?? '',
      /DaemonSet netplug-node has not been rolled out yet/,
    );

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
    await eventually('the new template', async () => (await readConflist(cluster)).plugins[0].policy_setup_timeout_seconds === 10);
    await eventually(
      'the new hash on the pod template',
      async () => hashOf(await readDaemonSet(cluster)) === configHash((await readConfigMap(cluster)).data ?? {}),
    );
    t.not(hashOf(await readDaemonSet(cluster)), before);

    // HostLocal: host-local with the node's pod CIDR, and USE_POD_CIDR on netplug-node.
    // Its pool without VXLAN, which host-local cannot serve (the default written back was VXLANCrossSubnet).
    await patchInstallation(cluster, {
      spec: { cni: { ipam: { type: 'HostLocal' } }, calicoNetwork: { ipPools: [{ cidr: '10.244.0.0/16', encapsulation: 'None' }] } },
    });
    await eventually('host-local', async () => (await readConflist(cluster)).plugins[0].ipam.type === 'host-local');
    t.deepEqual((await readConflist(cluster)).plugins[0].ipam, { type: 'host-local', subnet: 'usePodCidr' });
    await eventually(
      'USE_POD_CIDR',
      async () => env((await readDaemonSet(cluster)).spec?.template.spec?.containers[0]).USE_POD_CIDR === 'true',
    );
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
      async () => (await readPool(cluster, 'default-ipv4-ippool'))?.spec.spec['cidr'] === '10.250.0.0/16',
    );
    await eventually('the workloads', async () =>
      Boolean(await cluster.apps.readNamespacedDeployment({ name: 'netplug-kube-controllers', namespace: SYSTEM }).catch(() => undefined)),
    );
    // What the DaemonSet and Deployment controllers would report with one node, all ready (no controller manager runs here).
    const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
    const reportReady = async () => {
      const ds = await readDaemonSet(cluster);
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
    t.like(condition(await readStatus(cluster, 'netplug'), 'Available'), { status: 'True' });
    t.like(condition(await readStatus(cluster, 'netplug'), 'Progressing'), { status: 'False' });

    // A new MTU: a new template and hash, so a new generation the controller has not seen: Progressing, the version kept.
    await patchInstallation(cluster, { spec: { calicoNetwork: { mtu: 1400 } } });
    await eventually('Progressing again', async () => condition(await readInstallation(cluster), 'Progressing')?.status === 'True');
    t.is((await readConflist(cluster)).plugins[0].mtu, 1400);
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
        Boolean(await readDaemonSet(cluster).catch(() => undefined)) &&
        condition(await readInstallation(cluster), 'Progressing')?.status === 'True',
    );
    const [cm, ds] = [await readConfigMap(cluster), await readDaemonSet(cluster)];

    await patchInstallation(cluster, {
      spec: {
        calicoNetwork: {
          linuxPolicySetupTimeoutSeconds: 5,
          ipPools: [{ cidr: '10.245.0.0/16', name: 'default-ipv4-ippool' }, { cidr: '10.0.0.300/16' }],
        },
        policy: { endpointStatusPathPrefix: 'var/run/netplug' },
      },
    });
    await eventually('Degraded', async () => condition(await readInstallation(cluster), 'Degraded')?.status === 'True');
    const degraded = condition(await readInstallation(cluster), 'Degraded');
    t.is(degraded?.reason, 'InvalidConfiguration');
    t.regex(degraded?.message ?? '', /spec\.calicoNetwork\.ipPools\[1\]\.cidr "10\.0\.0\.300\/16" is not a CIDR/);
    t.regex(degraded?.message ?? '', /spec\.policy\.endpointStatusPathPrefix "var\/run\/netplug" must be an absolute host path/);
    t.like(condition(await readStatus(cluster, 'netplug'), 'Degraded'), { status: 'True', reason: 'InvalidConfiguration' });
    t.is((await readConfigMap(cluster)).metadata?.resourceVersion, cm.metadata?.resourceVersion, 'the template is unchanged');
    t.is((await readDaemonSet(cluster)).metadata?.resourceVersion, ds.metadata?.resourceVersion, 'the DaemonSet is unchanged');
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
    t.is((await readConfigMap(cluster)).metadata?.resourceVersion, cm.metadata?.resourceVersion);

    // Fixed: Degraded clears, the timeout applies.
    await patchInstallation(cluster, { spec: { calicoNetwork: { cni: null }, policy: null } });
    await eventually('no longer Degraded', async () => condition(await readInstallation(cluster), 'Degraded')?.status === 'False');
    await eventually('the timeout', async () => (await readConflist(cluster)).plugins[0].policy_setup_timeout_seconds === 5);
  },
);

test.serial(
  'the status says which generation it describes and why; status-only changes bring no reconcile, a change of the object does',
  async (t) => {
    const logFrom = cluster.log.length;
    t.teardown(async () => {
      if (!t.passed) t.log(cluster.log.slice(logFrom).join('\n'));
      await cluster.custom.deleteClusterCustomObject({ ...installation, name: 'other' }).catch(() => undefined);
      await removeInstallation(cluster);
    });
    await createInstallation(cluster, { calicoNetwork: { ipPools: [{ cidr: '10.247.0.0/16' }] } });
    const described = async () => {
      const object = await readInstallation(cluster);
      return object?.status?.observedGeneration === object?.metadata.generation && object?.status?.mtu === 0 ? object : undefined;
    };
    await eventually('the status of the defaulted spec', async () => (await described()) !== undefined);
    const current = (await described()) as InstallationObject;
    const generation = current.metadata.generation;
    t.true((generation ?? 0) > 1, 'the defaults written back made a new generation');
    t.true(current.status?.conditions?.every((c) => c.observedGeneration === generation));
    // No kubelet, no controller manager: the DaemonSet's controller never saw its generation.
    t.like(condition(current, 'Available'), { status: 'False', reason: 'RolloutPending' });
    t.like(condition(current, 'Progressing'), { status: 'True', reason: 'RolloutPending' });
    t.regex(condition(current, 'Progressing')?.message ?? '', /DaemonSet netplug-node has not been rolled out yet/);
    t.like(condition(current, 'Degraded'), { status: 'False', reason: 'AsExpected', message: '' });
    await eventually('NetplugStatus ippools of this generation', async () =>
      Boolean((await readStatus(cluster, 'ippools'))?.status?.conditions?.every((c) => c.observedGeneration === generation)),
    );
    t.like(condition(await readStatus(cluster, 'ippools'), 'Available'), { status: 'True', reason: 'AllObjectsAvailable' });

    // Installation "other" changed, and its status written for that generation (NotReconciled):
    // how many reconciles that took. One worker reconciles keys in the order their events came,
    // so a reconcile of default triggered before the change comes, and is counted, before it.
    await createInstallation(cluster, {}, 'other');
    let round = 0;
    const otherReconciled = async () => {
      const before = await reconciles(cluster.health);
      await cluster.custom.patchClusterCustomObject(
        { ...installation, name: 'other', body: { spec: { calicoNetwork: { mtu: 1000 + ++round } } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
      await eventually('"other" reconciled at its generation', async () => {
        const other = await readInstallation(cluster, 'other');
        return other?.spec.calicoNetwork?.mtu === 1000 + round && other.status?.observedGeneration === other.metadata.generation;
      });
      await eventually('its reconcile counted', async () => (await reconciles(cluster.health)) > before);
      return (await reconciles(cluster.health)) - before;
    };
    // The operator quiet: twice in a row, changing "other" brings its reconcile and no other.
    await eventually('the operator quiet', async () => (await otherReconciled()) === 1 && (await otherReconciled()) === 1);

    // A status-only change of Installation default, then two changes of "other" (the same watch
    // hears them in that order): by the time the second is reconciled, any reconcile of default the
    // status change brought would have run before it. There was none: two reconciles, both of
    // "other" (whose status the operator wrote each time, bringing none either), and default's
    // status stays as the test left it.
    const before = await reconciles(cluster.health);
    const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
    await cluster.custom.patchClusterCustomObjectStatus({ ...installation, body: { status: { mtu: 1234 } } }, merge);
    await otherReconciled();
    await otherReconciled();
    t.is((await readInstallation(cluster))?.status?.mtu, 1234, 'no reconcile of default for a change of its status');
    t.is((await reconciles(cluster.health)) - before, 2, 'two reconciles, of "other"');

    // A change of the object itself (a label) brings one, which puts the status right.
    await patchInstallation(cluster, { metadata: { labels: { 'example.org/touched': 'yes' } } });
    await eventually('the status put right', async () => (await readInstallation(cluster))?.status?.mtu === 0);
  },
);
