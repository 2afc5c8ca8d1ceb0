// The policy, profile and workloadendpoint controllers on the etcd datastore, against a real
// kube-apiserver and etcd, with exactly the RBAC rules the release gives them on etcd (fixtures.ts;
// auto-host-endpoints.test.ts holds them equal to the shipped ClusterRole): Kubernetes
// NetworkPolicies, Namespaces' and ServiceAccounts' labels and pods' labels are followed into
// etcd's documents (created, updated, removed); what was left by objects deleted while no
// controller ran is removed when they start, and what is not theirs stays. The built-in profile
// projectnet-default-allow is kept on etcd: written at start, put back when deleted or changed.
import test from 'ava';
import * as k8s from '@kubernetes/client-node';

import { controllersSettings } from '../../ts/controllers/settings.ts';
import { API_VERSION } from '../../ts/model/entry.ts';
import { keys } from '../../ts/model/keys.ts';
import type { NetworkPolicyResource, ProfileResource } from '../../ts/model/policy.ts';
import { workloadEndpoint, type WorkloadEndpoint } from '../../ts/model/workload-endpoint.ts';
import { defaultAllowProfile } from '../../ts/policy/default-allow.ts';
import { convertKubernetesPolicy, type KubeNetworkPolicy, namespaceProfile } from '../../ts/policy/kubernetes.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import { startEtcd } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { installCrds, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { CONTROLLER_ETCD_RULES, CONTROLLER_RULES, controllersIdentity, startControllers } from './fixtures.ts';

const shared = sharedTeardowns(test);
let kube: Kube;

test.before(async () => {
  kube = await startKube(shared);
  await installCrds(kube);
});

const profile = async (store: Store, name: string) => (await store.get<ProfileResource>(keys.profile(name)))?.value;
const labelsToApply = async (store: Store, name: string) => JSON.stringify((await profile(store, name))?.spec.labelsToApply ?? null);
const sortedJson = (labels: Record<string, string>) => JSON.stringify(Object.fromEntries(Object.entries(labels).sort()));

test('on the Kubernetes datastore the policy, profile and workloadendpoint controllers are ignored', (t) => {
  const settings = controllersSettings({ DATASTORE_TYPE: 'kubernetes', ENABLED_CONTROLLERS: 'node,policy,profile,workloadendpoint' });
  t.deepEqual([...settings.enabled], ['node']);
  t.deepEqual(settings.ignored, ['policy', 'profile', 'workloadendpoint']);
  const etcd = controllersSettings({ ENABLED_CONTROLLERS: 'policy,profile,workloadendpoint' });
  t.deepEqual([...etcd.enabled], ['policy', 'profile', 'workloadendpoint']);
  t.deepEqual(etcd.ignored, []);
});

test("etcd datastore: NetworkPolicies, Namespaces, ServiceAccounts and pods' labels are followed into etcd; orphans go on start", async (t) => {
  const etcd = await startEtcd(t);
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  const config = new k8s.KubeConfig();
  config.loadFromFile(kube.server.admin.kubeconfig);
  const networking = config.makeApiClient(k8s.NetworkingV1Api);
  const namespace = `polctl-${process.pid}`;
  t.teardown(() => kube.core.deleteNamespace({ name: namespace }).catch(() => undefined));

  // Left by objects deleted while no controller ran, and documents that are not the controllers'.
  const orphanPolicy = keys.networkPolicy(namespace, 'knp.default.gone');
  const ownPolicy = keys.networkPolicy(namespace, 'mine');
  const policyDocument = (name: string): NetworkPolicyResource => ({
    kind: 'NetworkPolicy',
    apiVersion: API_VERSION,
    metadata: { name, namespace },
    spec: { selector: 'all()', types: ['Ingress'] },
  });
  const profileDocument = (name: string): ProfileResource => ({ kind: 'Profile', apiVersion: API_VERSION, metadata: { name }, spec: {} });
  t.true(
    await store.commit([
      { key: orphanPolicy, create: policyDocument('knp.default.gone') },
      { key: ownPolicy, create: policyDocument('mine') },
      { key: keys.profile('kns.gone-namespace'), create: profileDocument('kns.gone-namespace') },
      { key: keys.profile(`ksa.${namespace}.gone.account`), create: profileDocument(`ksa.${namespace}.gone.account`) },
      { key: keys.profile('custom'), create: profileDocument('custom') },
    ]),
  );

  await kube.core.createNamespace({ body: { metadata: { name: namespace, labels: { team: 'a' } } } });
  await kube.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'robot', labels: { role: 'r1' } } } });
  await networking.createNamespacedNetworkPolicy({
    namespace,
    body: { metadata: { name: 'web' }, spec: { podSelector: { matchLabels: { app: 'web' } }, policyTypes: ['Ingress'] } },
  });
  await kube.core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: 'p1', labels: { app: 'web' } },
      spec: { nodeName: 'n1', serviceAccountName: 'robot', containers: [{ name: 'main', image: 'busybox' }] },
    },
  });
  // The pod's endpoint as an ADD wrote it, with the labels it read then.
  const endpoint = workloadEndpoint(
    namespace,
    {
      orchestrator: 'k8s',
      workload: '',
      node: 'n1',
      containerID: 'c1',
      pod: 'p1',
      endpoint: 'eth0',
      interfaceName: 'cali0001',
      mac: '0a:58:0a:00:00:05',
      ipNetworks: ['10.0.0.5/32'],
      profiles: [`kns.${namespace}`, `ksa.${namespace}.robot`],
      serviceAccountName: 'robot',
    },
    { app: 'old', 'projectnet.org/serviceaccount': 'robot', 'projectnet.org/network': 'k8s-pod-network' },
  );
  const endpointKey = keys.workloadEndpoint(namespace, endpoint.metadata.name);
  t.true(await store.commit([{ key: endpointKey, create: endpoint }]));
  const endpointLabels = async () => sortedJson((await store.get<WorkloadEndpoint>(endpointKey))?.value.metadata.labels ?? {});
  const podLabels = (own: Record<string, string>) =>
    sortedJson({
      ...own,
      'projectnet.org/namespace': namespace,
      'projectnet.org/orchestrator': 'k8s',
      'projectnet.org/serviceaccount': 'robot',
      'projectnet.org/network': 'k8s-pod-network',
    });

  const identity = await controllersIdentity(kube, 'netplug-kube-controllers-policy', [...CONTROLLER_RULES, ...CONTROLLER_ETCD_RULES]);
  const controllers = await startControllers(t, {
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: etcd.endpoints,
    KUBECONFIG: identity.kubeconfig,
    ENABLED_CONTROLLERS: 'policy,profile,workloadendpoint',
  });

  const policyKey = keys.networkPolicy(namespace, 'knp.default.web');
  // What the policy stands for, converted from the spec this test gave it.
  const spec: KubeNetworkPolicy['spec'] = { podSelector: { matchLabels: { app: 'web' } }, policyTypes: ['Ingress'] };
  const converted = async () => {
    const uid = (await networking.readNamespacedNetworkPolicy({ namespace, name: 'web' })).metadata?.uid ?? '';
    return JSON.stringify(convertKubernetesPolicy({ metadata: { name: 'web', namespace, uid }, spec }).policy);
  };
  const policyText = async () => JSON.stringify((await store.get(policyKey))?.value ?? null);
  await eventually('the NetworkPolicy is in etcd as knp.default.web', async () => (await policyText()) === (await converted()));
  // The API server labels every namespace with its name (kubernetes.io/metadata.name) besides.
  const namespaceLabels = async () => (await profile(store, `kns.${namespace}`))?.spec.labelsToApply ?? {};
  await eventually(
    'the namespace and the service account are profiles',
    async () =>
      (await namespaceLabels())['pcns.team'] === 'a' &&
      (await labelsToApply(store, `ksa.${namespace}.robot`)) === JSON.stringify({ 'pcsa.role': 'r1', 'pcsa.projectnet.org/name': 'robot' }),
  );
  t.deepEqual(
    await namespaceLabels(),
    namespaceProfile({ metadata: { name: namespace, labels: { team: 'a', 'kubernetes.io/metadata.name': namespace } } }).spec.labelsToApply,
  );
  await eventually("the endpoint carries the pod's labels", async () => (await endpointLabels()) === podLabels({ app: 'web' }));
  await eventually('the orphans are removed', async () => {
    const gone = await Promise.all(
      [orphanPolicy, keys.profile('kns.gone-namespace'), keys.profile(`ksa.${namespace}.gone.account`)].map((key) => store.get(key)),
    );
    return gone.every((entry) => entry === undefined);
  });
  t.truthy(await store.get(ownPolicy), "a policy that is not the controller's stays");
  t.truthy(await store.get(keys.profile('custom')), "a profile that is not the controller's stays");
  t.deepEqual((await profile(store, `kns.${namespace}`))?.spec.ingress, [{ action: 'Allow' }]);

  // The built-in profile: there from the start, put back when deleted or changed, never swept.
  const defaultAllowKey = keys.profile('projectnet-default-allow');
  const builtIn = JSON.stringify(defaultAllowProfile());
  const defaultAllowText = async () => JSON.stringify((await store.get(defaultAllowKey))?.value ?? null);
  await eventually('projectnet-default-allow is on etcd', async () => (await defaultAllowText()) === builtIn);
  t.deepEqual((await profile(store, 'projectnet-default-allow'))?.spec, {
    ingress: [{ action: 'Allow' }],
    egress: [{ action: 'Allow' }],
  });
  const stored = await store.get(defaultAllowKey);
  t.true(await store.commit([{ key: defaultAllowKey, remove: true, revision: stored?.revision as string }]));
  await eventually('projectnet-default-allow comes back after it is deleted', async () => (await defaultAllowText()) === builtIn);
  const back = await store.get(defaultAllowKey);
  t.true(
    await store.commit([
      {
        key: defaultAllowKey,
        update: { ...defaultAllowProfile(), spec: { ingress: [{ action: 'Deny' }], egress: [{ action: 'Allow' }] } },
        revision: back?.revision as string,
      },
    ]),
  );
  await eventually('projectnet-default-allow is put back after it is changed', async () => (await defaultAllowText()) === builtIn);
  await controllers.logged('the profile put back', 'wrote profile projectnet-default-allow');

  // Updates.
  await networking.patchNamespacedNetworkPolicy(
    {
      namespace,
      name: 'web',
      body: [{ op: 'add', path: '/spec/ingress', value: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }] }],
    },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
  );
  spec.ingress = [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }];
  await eventually('the policy follows its update', async () => (await policyText()) === (await converted()));
  t.regex(await policyText(), /app == \\"client\\"/);
  await kube.core.patchNamespace(
    { name: namespace, body: [{ op: 'replace', path: '/metadata/labels/team', value: 'b' }] },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
  );
  await eventually('the namespace profile follows its labels', async () => (await namespaceLabels())['pcns.team'] === 'b');
  await kube.core.patchNamespacedServiceAccount(
    { namespace, name: 'robot', body: [{ op: 'replace', path: '/metadata/labels', value: { role: 'r2' } }] },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
  );
  await eventually('the service account profile follows its labels', async () =>
    (await labelsToApply(store, `ksa.${namespace}.robot`)).includes('"pcsa.role":"r2"'),
  );
  await kube.core.patchNamespacedPod(
    { namespace, name: 'p1', body: [{ op: 'replace', path: '/metadata/labels', value: { app: 'api', tier: 'back' } }] },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
  );
  await eventually(
    "the endpoint follows the pod's labels",
    async () => (await endpointLabels()) === podLabels({ app: 'api', tier: 'back' }),
  );
  const endpointAfter = await store.get<WorkloadEndpoint>(endpointKey);
  t.deepEqual(endpointAfter?.value.spec.ipNetworks, ['10.0.0.5/32'], 'the rest of the endpoint is as the ADD wrote it');

  // Deletions.
  await networking.deleteNamespacedNetworkPolicy({ namespace, name: 'web' });
  await eventually('the policy document goes with its NetworkPolicy', async () => (await store.get(policyKey)) === undefined);
  await kube.core.deleteNamespacedServiceAccount({ namespace, name: 'robot' });
  await eventually('the profile goes with its service account', async () => (await profile(store, `ksa.${namespace}.robot`)) === undefined);
  t.truthy(await profile(store, `kns.${namespace}`), "the namespace's profile stays while it exists");
  t.truthy(await store.get(ownPolicy));
  await controllers.logged('the policy removed', `removed NetworkPolicy ${namespace}/knp.default.gone`);
  t.is(await controllers.stop(), 0);
});
