// Kubernetes mode against a real kube-apiserver, with netplug-ipam on etcd: the pod's labels,
// service account and named ports in its workload endpoint, the host interface named after
// namespace and pod, a new sandbox of a pod and a DEL for the old one (which leaves the new one's
// veth and host routes, though they have the old one's name), the plugin's permissions,
// and an API server that does not answer.
import { createHash } from 'node:crypto';

import test from 'ava';

import { invoke } from '../helpers/cni.ts';
import { startEtcd, type EtcdServer } from '../helpers/etcd.ts';
import { addressesOf, ctlOk, etcdKeys, etcdValue, ipamNetconf, totalAllocated } from '../helpers/ipam.ts';
import { containerId, createNetns, link, routes } from '../helpers/kernel.ts';
import { createPod, podArgs, startKube, type Kube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

let kube: Kube;
let etcd: EtcdServer;
const shared = sharedTeardowns(test);

test.before(async (t) => {
  kube = await startKube(shared);
  etcd = await startEtcd(shared);
  ctlOk(t, etcd, 'pool', 'create', 'default', '--cidr', '10.110.0.0/16');
});

/** A netconf in Kubernetes mode: policy from Kubernetes, the plugin's kubeconfig. */
function k8sNetconf(extra: Record<string, unknown> = {}, kubeconfig = kube.server.plugin.kubeconfig) {
  return ipamNetconf(etcd, { node: 'kube-node', extra: { kubernetes: { kubeconfig }, policy: { type: 'k8s' }, ...extra } });
}

const hostVethOf = (pod: { namespace: string; name: string }) =>
  `cali${createHash('sha1').update(`${pod.namespace}.${pod.name}`).digest('hex').slice(0, 11)}`;

test("the pod's labels, service account and named ports go into its workload endpoint", async (t) => {
  const pod = await createPod(kube, {
    labels: { app: 'web', tier: 'front' },
    serviceAccount: 'web-sa',
    ports: [{ name: 'http', containerPort: 8080 }, { containerPort: 9000 }],
  });
  const id = containerId();
  const netns = createNetns(t, 'k8s');
  const netconf = k8sNetconf();
  const add = invoke({ command: 'ADD', containerId: id, netns: netns.path, netconf, args: podArgs(pod, id) });
  t.is(add.status, 0, add.stdout);
  t.is(add.json.interfaces[0].name, hostVethOf(pod), 'host interface named after namespace and pod, as the policy agent derives it');
  t.truthy(link(hostVethOf(pod)));
  const key = `/netplug/resources/v3/projectnet.org/workloadendpoints/${pod.namespace}/kube--node-k8s-${pod.name.replaceAll('-', '--')}-eth0`;
  t.deepEqual(await etcdKeys(t, etcd, `/netplug/resources/v3/projectnet.org/workloadendpoints/${pod.namespace}/`), [key]);
  const endpoint = await etcdValue(t, etcd, key);
  t.like(endpoint.metadata.labels, {
    app: 'web',
    tier: 'front',
    'projectnet.org/namespace': pod.namespace,
    'projectnet.org/orchestrator': 'k8s',
    'projectnet.org/serviceaccount': 'web-sa',
  });
  t.like(endpoint.spec, {
    orchestrator: 'k8s',
    pod: pod.name,
    containerID: id,
    serviceAccountName: 'web-sa',
    ipNetworks: [add.json.ips[0].address],
  });
  t.deepEqual(endpoint.spec.profiles, [`kns.${pod.namespace}`, `ksa.${pod.namespace}.web-sa`]);
  t.deepEqual(endpoint.spec.ports, [{ name: 'http', protocol: 'TCP', port: 8080 }]);
  t.is(invoke({ command: 'DEL', containerId: id, netns: netns.path, netconf, args: podArgs(pod, id) }).status, 0);
  t.deepEqual(await etcdKeys(t, etcd, `/netplug/resources/v3/projectnet.org/workloadendpoints/${pod.namespace}/`), []);
});

test.serial('a new sandbox of a pod replaces the old one; a DEL for the old sandbox leaves the new one', async (t) => {
  const pod = await createPod(kube);
  const netconf = k8sNetconf();
  const [oldId, newId] = [containerId(), containerId()];
  const [oldNs, newNs] = [createNetns(t, 'sb'), createNetns(t, 'sb')];
  const before = totalAllocated(t, etcd);
  const first = invoke({ command: 'ADD', containerId: oldId, netns: oldNs.path, netconf, args: podArgs(pod, oldId) });
  const second = invoke({ command: 'ADD', containerId: newId, netns: newNs.path, netconf, args: podArgs(pod, newId) });
  t.is(second.status, 0, second.stdout);
  t.not(addressesOf(second.json)[0], addressesOf(first.json)[0], 'the new sandbox gets its own address');
  t.is(link('eth0', oldNs), undefined, 'the old sandbox lost its interface to the new one');
  t.is(totalAllocated(t, etcd), before + 2, "the old sandbox's address is kept until its DEL");
  const key = `/netplug/resources/v3/projectnet.org/workloadendpoints/${pod.namespace}/kube--node-k8s-${pod.name.replaceAll('-', '--')}-eth0`;
  t.is((await etcdValue(t, etcd, key)).spec.containerID, newId);

  const hostRoute = `${addressesOf(second.json)[0]?.split('/')[0]} dev ${hostVethOf(pod)} scope link`;
  t.true(routes(4).includes(hostRoute), 'the host routes the new address to the new veth');

  t.is(invoke({ command: 'DEL', containerId: oldId, netns: oldNs.path, netconf, args: podArgs(pod, oldId) }).status, 0);
  t.is((await etcdValue(t, etcd, key))?.spec.containerID, newId, "a DEL for the stale sandbox keeps the pod's endpoint");
  t.truthy(link(hostVethOf(pod)), 'and its interface');
  t.true(routes(4).includes(hostRoute), 'and its host route (the veth has the name the stale sandbox had)');
  t.is(totalAllocated(t, etcd), before + 1, "and releases the stale sandbox's address");
  // The kubelet's garbage collection of the stale sandbox, a minute later: its namespace is gone
  // and the runtime gives no path. The pod's sandbox stays reachable.
  t.is(invoke({ command: 'DEL', containerId: oldId, netns: '', netconf, args: podArgs(pod, oldId) }).status, 0);
  t.true(routes(4).includes(hostRoute), 'a DEL without a namespace leaves the host route too');
  t.is(totalAllocated(t, etcd), before + 1);
  t.is(invoke({ command: 'DEL', containerId: newId, netns: newNs.path, netconf, args: podArgs(pod, newId) }).status, 0);
  t.is(await etcdValue(t, etcd, key), undefined);
  t.is(totalAllocated(t, etcd), before);
});

test('without policy.type k8s nothing is read: an identity with no permissions works', async (t) => {
  const pod = await createPod(kube, { labels: { app: 'x' } });
  const nobody = kube.server.identity('netplug-nobody');
  const id = containerId();
  const netconf = ipamNetconf(etcd, { node: 'kube-node', extra: { kubernetes: { kubeconfig: nobody.kubeconfig } } });
  const add = invoke({ command: 'ADD', containerId: id, netns: createNetns(t, 'np').path, netconf, args: podArgs(pod, id) });
  t.is(add.status, 0, add.stdout);
  const key = `/netplug/resources/v3/projectnet.org/workloadendpoints/${pod.namespace}/kube--node-k8s-${pod.name.replaceAll('-', '--')}-eth0`;
  const endpoint = await etcdValue(t, etcd, key);
  t.deepEqual(endpoint.spec.profiles, [netconf.name]);
  t.is(endpoint.metadata.labels.app, undefined);
});

test.serial('an identity that may not read pods gets an error naming the permission; nothing is allocated', async (t) => {
  const pod = await createPod(kube);
  const limited = await kube.identityWith('netplug-no-pods', [{ apiGroups: [''], resources: ['nodes'], verbs: ['get'] }]);
  const before = totalAllocated(t, etcd);
  const netns = createNetns(t, 'perm');
  const add = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: netns.path,
    netconf: k8sNetconf({}, limited.kubeconfig),
    args: podArgs(pod, 'x'),
  });
  t.is(add.json.code, 100, add.stdout);
  t.regex(
    add.json.msg,
    /the Kubernetes API at https:\/\/127\.0\.0\.1:\d+ refused: pods ".*" is forbidden: User "netplug-no-pods" cannot get resource "pods".*; netplug needs get on pods in all namespaces \(policy\.type k8s\)/,
  );
  t.is(totalAllocated(t, etcd), before);
  t.is(link('eth0', netns), undefined);
});

test('an API server that does not answer is error 11, naming it', async (t) => {
  const pod = { namespace: 'default', name: 'nowhere' };
  const netconf = k8sNetconf({ kubernetes: { k8s_api_root: 'https://127.0.0.1:1' } });
  const add = invoke({ command: 'ADD', containerId: containerId(), netns: createNetns(t, 'down').path, netconf, args: podArgs(pod, 'x') });
  t.is(add.json.code, 11, add.stdout);
  t.regex(add.json.msg, /the Kubernetes API at https:\/\/127\.0\.0\.1:1 did not answer: .*Connection refused/);
});

test('Kubernetes mode needs a way to the API', async (t) => {
  const pod = await createPod(kube);
  const netconf = ipamNetconf(etcd, { extra: { policy: { type: 'k8s' } } });
  const add = invoke({ command: 'ADD', containerId: containerId(), netns: createNetns(t, 'none').path, netconf, args: podArgs(pod, 'x') });
  t.is(add.json.code, 7);
  t.is(add.json.msg, 'netconf field "kubernetes": Kubernetes mode needs kubernetes.kubeconfig or kubernetes.k8s_api_root to reach the API');
});

test("the Kubernetes datastore on an API server without netplug's resources names what to install; nothing is left", async (t) => {
  const pod = await createPod(kube);
  const netns = createNetns(t, 'nocrd');
  const netconf = {
    cniVersion: '1.1.0',
    name: 'nocrd',
    type: 'netplug',
    nodename: 'kube-node',
    datastore_type: 'kubernetes',
    kubernetes: { kubeconfig: kube.server.admin.kubeconfig },
    policy: { type: 'k8s' },
    ipam: { type: 'netplug-ipam' },
  };
  const add = invoke({ command: 'ADD', containerId: containerId(), netns: netns.path, netconf, args: podArgs(pod, 'x') });
  t.is(add.json.code, 100, add.stdout);
  t.is(
    add.json.msg,
    "the Kubernetes API has no ippools.crd.projectnet.org resource: install netplug's custom resource definitions (deploy/crds/) first",
  );
  t.is(link('eth0', netns), undefined);
  // Without policy.type k8s nothing else reaches for the API first.
  const { policy: _policy, ...withoutPolicy } = netconf;
  const missing = invoke({
    command: 'ADD',
    containerId: containerId(),
    netns: netns.path,
    netconf: { ...withoutPolicy, kubernetes: {} },
    args: podArgs(pod, 'y'),
  });
  t.is(missing.json.code, 7);
  t.is(
    missing.json.msg,
    'netconf field "kubernetes": datastore_type "kubernetes" needs kubernetes.kubeconfig or kubernetes.k8s_api_root to reach the API',
  );
});
