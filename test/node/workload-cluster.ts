// Two "nodes" on one subnet (test/helpers/nodes.ts) running the built netplug-node, on etcd or on
// the Kubernetes datastore, with Kubernetes pods made by the built CNI plugin: the pod object
// (with its annotations, on its node) first, then its ADD, then, on the Kubernetes datastore, its
// status as the kubelet reports it (phase Running, podIPs: where the agents read a pod's
// addresses there). For the tests of addresses outside the blocks (ipAddrsNoIpam) and floating
// IPs. Pools are made before the agents start; the agents' refresh is an hour, so every change
// they make comes from the datastore's watch.
import type * as k8s from '@kubernetes/client-node';

import type { EncapsulationMode } from '../../ts/model/ip-pool.ts';
import { keys } from '../../ts/model/keys.ts';
import { poolResource } from '../../ts/model/pool-resource.ts';
import { CNI_PLUGIN, NODE } from '../../ts/render/objects.ts';
import { renderRbac } from '../../ts/render/rbac.ts';
import { openStore } from '../../ts/store/open.ts';
import type { Store } from '../../ts/store/store.ts';
import type { EtcdServer } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import type { Kube } from '../helpers/kube.ts';
import { makeTopology, netplugRoutes, type Pod, type TestNode, type Topology } from '../helpers/nodes.ts';
import type { Teardowns } from '../helpers/shared.ts';

export type Datastore = 'etcdv3' | 'kubernetes';

export interface PoolOptions {
  name: string;
  cidr: string;
  ipipMode?: EncapsulationMode;
  vxlanMode?: EncapsulationMode;
}

export interface WorkloadCluster {
  datastore: Datastore;
  topology: Topology;
  nodes: [TestNode, TestNode];
  /** A Kubernetes pod named `name` on `node`, its annotations given, networked by the built plugin. */
  addPod(node: TestNode, name: string, annotations?: Record<string, string>): Promise<Pod>;
  /** Its DEL, then the pod object deleted, as a kubelet and the API server would. */
  deletePod(pod: Pod): Promise<void>;
  /** Waits until `node`'s netplug routes satisfy `holds`; the failure names them and the agent's log. */
  routesBecome(node: TestNode, what: string, holds: (routes: string[]) => boolean): Promise<void>;
}

/** The rules of a ClusterRole the manifests ship on the Kubernetes datastore. */
function shippedRules(name: string): k8s.V1PolicyRule[] {
  const role = renderRbac({ datastore: 'kubernetes', namespace: 'kube-system', image: 'netplug:test' }).find(
    (object) => object.kind === 'ClusterRole' && object.metadata.name === name,
  ) as { rules: k8s.V1PolicyRule[] } | undefined;
  if (!role) throw new Error(`no ClusterRole ${name} in the manifests`);
  return role.rules;
}

/**
 * Starts the two nodes (`prefix`1 and `prefix`2) on `datastore`, `pools` made first. On etcd,
 * `etcd` holds netplug's state; the pods are on `kube` either way.
 */
export async function startWorkloadCluster(
  shared: Teardowns,
  options: { datastore: Datastore; prefix: string; kube: Kube; etcd?: EtcdServer; pools: PoolOptions[] },
): Promise<WorkloadCluster> {
  const { datastore, prefix, kube, etcd } = options;
  const admin = kube.server.admin.kubeconfig;
  const store: Store =
    datastore === 'kubernetes'
      ? await openStore({ datastore_type: 'kubernetes', kubernetes: { kubeconfig: admin } })
      : await openStore({ datastore_type: 'etcdv3', etcd_endpoints: (etcd as EtcdServer).endpoints });
  shared.teardown(() => store.close());
  for (const pool of options.pools) {
    const value = poolResource(pool.name, { cidr: pool.cidr, 'block-size': '26' }, new Date());
    const spec = { ...value.spec, ipipMode: pool.ipipMode ?? 'Never', vxlanMode: pool.vxlanMode ?? 'Never' };
    await store.commit([{ key: keys.pool(pool.name), create: { ...value, spec } }]);
  }
  const names = [`${prefix}1`, `${prefix}2`];
  const kubePort = Number(new URL(kube.server.url).port);
  const datastoreNetconf = datastore === 'kubernetes' ? { datastore_type: 'kubernetes', kubernetes: { kubeconfig: admin } } : etcd?.netconf;
  let agentEnv: Record<string, string>;
  if (datastore === 'kubernetes') {
    for (const name of names) await kube.core.createNode({ body: { metadata: { name, labels: { 'kubernetes.io/hostname': name } } } });
    shared.teardown(async () => {
      for (const name of names) await kube.core.deleteNode({ name }).catch(() => undefined);
    });
    // Exactly the rights the manifests give netplug-node: its pods' watch among them.
    const agent = await kube.identityWith(`netplug-node-${prefix}`, [...shippedRules(NODE), ...shippedRules(CNI_PLUGIN)]);
    agentEnv = { DATASTORE_TYPE: 'kubernetes', KUBECONFIG: agent.kubeconfig };
  } else {
    agentEnv = { DATASTORE_TYPE: 'etcdv3', ETCD_ENDPOINTS: (etcd as EtcdServer).endpoints, KUBECONFIG: admin };
  }
  const topology = await makeTopology(shared, {
    nodes: names.map((name) => ({ name, subnet: 1 })),
    ports: [kubePort, ...(etcd && datastore === 'etcdv3' ? [etcd.port] : [])],
    datastoreNetconf: datastoreNetconf ?? {},
    agentEnv: { ...agentEnv, NO_DEFAULT_POOLS: 'true', NETPLUG_ROUTE_REFRESH_INTERVAL: '3600' },
  });
  for (const node of topology.nodes) node.startAgent();

  const namespace = `wl-${prefix}`;
  await kube.core.createNamespace({ body: { metadata: { name: namespace } } });
  shared.teardown(() =>
    kube.core.deleteNamespace({ name: namespace }).then(
      () => undefined,
      () => undefined,
    ),
  );
  // The plugin reads the pod (policy.type k8s) and honours both annotations only when asked to.
  const podNetconf = {
    policy: { type: 'k8s' },
    kubernetes: { kubeconfig: admin },
    feature_control: { ip_addrs_no_ipam: true, floating_ips: true },
  };
  const objectOf = new Map<Pod, string>();
  return {
    datastore,
    topology,
    nodes: topology.nodes as [TestNode, TestNode],
    async addPod(node, name, annotations = {}) {
      await kube.core.createNamespacedPod({
        namespace,
        body: {
          metadata: { name, annotations },
          spec: { nodeName: node.name, containers: [{ name: 'main', image: 'busybox' }] },
        },
      });
      const args = `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name}`;
      const pod = topology.addPod(node, undefined, { args, netconf: podNetconf });
      objectOf.set(pod, name);
      if (datastore === 'kubernetes') {
        const made = await kube.core.readNamespacedPod({ namespace, name });
        made.status = { ...made.status, phase: 'Running', podIP: pod.address, podIPs: [{ ip: pod.address }] };
        await kube.core.replaceNamespacedPodStatus({ namespace, name, body: made });
      }
      return pod;
    },
    async deletePod(pod) {
      topology.deletePod(pod);
      const name = objectOf.get(pod);
      if (name) await kube.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
      objectOf.delete(pod);
    },
    async routesBecome(node, what, holds) {
      await eventually(`${node.name}: ${what}`, () => holds(netplugRoutes(node.netns)), { timeoutMs: 60_000 }).catch((err: Error) => {
        throw new Error(`${err.message}; routes ${JSON.stringify(netplugRoutes(node.netns))}; log: ${node.log().slice(-3000)}`);
      });
    },
  };
}
