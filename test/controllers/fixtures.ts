// netplug-kube-controllers tests: the controllers run in-process (runControllersMain, as the
// executable runs it) against a real kube-apiserver and a real datastore; IPAM state is made by
// the allocator itself, as an ADD makes it (with the pod attributes and workload endpoint ADD
// records); identities hold exactly the RBAC rules the report gives, and the shipped Role for the
// leader election's Lease in a namespace of their own (so that tests running side by side on one
// API server each elect their own leader).
import type { ExecutionContext } from 'ava';
import type * as k8s from '@kubernetes/client-node';

import type { Identity } from '../../scripts/lib/kube-server.ts';
import { CONTROLLERS } from '../../ts/render/objects.ts';
import { renderRbac } from '../../ts/render/rbac.ts';
import type { Kube } from '../helpers/kube.ts';
import { runControllersMain } from '../../ts/controllers/main.ts';
import { allocate } from '../../ts/ipam/allocator.ts';
import { attributeAt } from '../../ts/ipam/block.ts';
import { API_VERSION } from '../../ts/model/entry.ts';
import { handleId, keys } from '../../ts/model/keys.ts';
import type { NodeResource } from '../../ts/model/node.ts';
import type { PoolResource } from '../../ts/model/ip-pool.ts';
import { checkedBlocks } from '../../ts/model/checked-documents.ts';
import { listPools } from '../../ts/ipam/pools.ts';
import { addressOf } from '../../ts/ipam/block.ts';
import { workloadEndpoint, workloadEndpointName } from '../../ts/model/workload-endpoint.ts';
import type { Entry, Store } from '../../ts/store/store.ts';
import { freePort } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';

/** What the controllers need in the Kubernetes API with the etcd datastore. */
export const CONTROLLER_RULES: k8s.V1PolicyRule[] = [
  { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
];

/** What the policy and profile controllers need besides with the etcd datastore (the objects they copy there). */
export const CONTROLLER_ETCD_RULES: k8s.V1PolicyRule[] = [
  { apiGroups: [''], resources: ['namespaces', 'serviceaccounts'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['get', 'list', 'watch'] },
];

/** What they need besides with the Kubernetes datastore (netplug's custom resources). */
export const CONTROLLER_DATASTORE_RULES: k8s.V1PolicyRule[] = [
  { apiGroups: ['crd.projectnet.org'], resources: ['ipamblocks'], verbs: ['get', 'list', 'update', 'delete'] },
  { apiGroups: ['crd.projectnet.org'], resources: ['ipamhandles'], verbs: ['get', 'update', 'delete'] },
  { apiGroups: ['crd.projectnet.org'], resources: ['blockaffinities'], verbs: ['list', 'delete'] },
  { apiGroups: ['crd.projectnet.org'], resources: ['ipampendingrequests'], verbs: ['list', 'delete'] },
  { apiGroups: ['crd.projectnet.org'], resources: ['workloadendpoints'], verbs: ['get', 'delete'] },
  { apiGroups: ['crd.projectnet.org'], resources: ['ippools'], verbs: ['list'] },
  { apiGroups: ['crd.projectnet.org'], resources: ['hostendpoints'], verbs: ['list', 'watch', 'create', 'update', 'delete'] },
  { apiGroups: ['crd.projectnet.org'], resources: ['kubecontrollersconfigurations'], verbs: ['get', 'list', 'watch', 'create', 'update'] },
  { apiGroups: ['crd.projectnet.org'], resources: ['clusterinformations'], verbs: ['get', 'update'], resourceNames: ['default'] },
];

/** The Lease namespace of each identity's kubeconfig. */
const leaseNamespaces = new Map<string, string>();

/**
 * An identity bound to `rules` cluster-wide, and in a namespace of its own (named after it) to the
 * Role the release gives the controllers for their Lease.
 */
export async function controllersIdentity(kube: Kube, user: string, rules: k8s.V1PolicyRule[]): Promise<Identity> {
  const identity = await kube.identityWith(user, rules);
  const namespace = `lease-${user}`.slice(0, 63).replace(/-+$/, '');
  await kube.core.createNamespace({ body: { metadata: { name: namespace } } });
  const role = renderRbac({ datastore: 'kubernetes', namespace, image: 'netplug:test' }).find(
    (object) => object.kind === 'Role' && object.metadata.name === CONTROLLERS,
  ) as unknown as k8s.V1Role;
  await kube.rbac.createNamespacedRole({ namespace, body: { metadata: { name: CONTROLLERS, namespace }, rules: role.rules ?? [] } });
  await kube.rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: CONTROLLERS, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: CONTROLLERS },
      subjects: [{ kind: 'User', name: user }],
    },
  });
  leaseNamespaces.set(identity.kubeconfig, namespace);
  return identity;
}

/** The namespace of `identity`'s Lease. */
export const leaseNamespaceOf = (identity: Identity): string => leaseNamespaces.get(identity.kubeconfig) ?? 'kube-system';

export interface Controllers {
  lines: string[];
  /**
   * Resolves once a logged line matches `pattern`. A line about a write comes after the write,
   * which the test's own reads may see first: waited for, not looked up.
   */
  logged(what: string, pattern: string | ((line: string) => boolean)): Promise<void>;
  health: string;
  /** Aborts the signal; resolves to the exit code. */
  stop(): Promise<number>;
}

/**
 * runControllersMain with `env` (and a free health port, a 1 s grace period, the Lease in the
 * identity's namespace, unless given), its health checks every second, stopped at teardown.
 */
export async function startControllers(
  t: Pick<ExecutionContext, 'teardown'> & Partial<Pick<ExecutionContext, 'passed' | 'log'>>,
  env: Record<string, string>,
): Promise<Controllers> {
  const port = await freePort();
  const lines: string[] = [];
  const abort = new AbortController();
  const leaseNamespace = leaseNamespaces.get(env['KUBECONFIG'] ?? '');
  const exit = runControllersMain(
    [],
    {
      LEAK_GRACE_PERIOD: '1s',
      NETPLUG_CONTROLLERS_HEALTH_ADDR: `127.0.0.1:${port}`,
      ...(leaseNamespace ? { LEADER_ELECTION_NAMESPACE: leaseNamespace } : {}),
      ...env,
    },
    abort.signal,
    {
      writeLog: (line) => lines.push(line),
      checkIntervalMs: 1000,
    },
  );
  const stop = () => {
    abort.abort();
    return exit;
  };
  t.teardown(async () => {
    await stop();
    // A file's shared teardowns have no result to log with.
    if (t.log && !t.passed) t.log(lines.join(''));
  });
  const logged = async (what: string, pattern: string | ((line: string) => boolean)) => {
    const matches = typeof pattern === 'string' ? (line: string) => line.includes(pattern) : pattern;
    await eventually(`the controllers log ${what}`, () => lines.some(matches));
  };
  return { lines, logged, health: `http://127.0.0.1:${port}`, stop };
}

export async function status(url: string): Promise<{ code: number; text: string }> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    return { code: response.status, text: await response.text() };
  } catch (err) {
    return { code: 0, text: (err as Error).message };
  }
}

export async function createPool(store: Store, name: string, cidr: string): Promise<void> {
  const pool: PoolResource = {
    kind: 'IPPool',
    apiVersion: API_VERSION,
    metadata: { name, creationTimestamp: new Date().toISOString() },
    spec: { cidr, blockSize: 26, nodeSelector: 'all()', ipipMode: 'Never', vxlanMode: 'Never', natOutgoing: false, disabled: false },
  };
  if (!(await store.commit([{ key: keys.pool(name), create: pool }]))) throw new Error(`pool ${name} exists`);
}

export async function createNodeResource(store: Store, name: string, labels: Record<string, string>): Promise<void> {
  const node: NodeResource = {
    kind: 'Node',
    apiVersion: API_VERSION,
    metadata: { name, creationTimestamp: new Date().toISOString(), labels },
    spec: {},
  };
  if (!(await store.commit([{ key: keys.node(name), create: node }]))) throw new Error(`node ${name} exists`);
}

let containers = 0;

export interface Allocated {
  address: string;
  handle: string;
  /** The workload endpoint's key, for a pod's address. */
  endpointKey?: string;
}

/**
 * An address for `pod` on `node` as ADD takes it (handle, attributes, workload endpoint), or with
 * no pod attributes (a tunnel address) when `pod` is undefined.
 */
export async function allocateFor(store: Store, node: string, pod?: { namespace: string; name: string }): Promise<Allocated> {
  const containerId = `c${process.pid}x${containers++}`.padEnd(64, '0');
  const handle = handleId('k8s-pod-network', containerId);
  const pools = await listPools(store);
  const endpointName = pod && workloadEndpointName(node, 'k8s', pod.name, 'eth0');
  const attributes: Record<string, string> = pod
    ? {
        node,
        ifname: 'eth0',
        timestamp: new Date().toISOString(),
        endpoint: `${pod.namespace}/${endpointName}`,
        namespace: pod.namespace,
        pod: pod.name,
      }
    : { node, type: 'ipipTunnelAddress', timestamp: new Date().toISOString() };
  const companions =
    pod && endpointName
      ? [
          {
            key: keys.workloadEndpoint(pod.namespace, endpointName),
            value: (addresses: readonly string[]) =>
              workloadEndpoint(pod.namespace, {
                orchestrator: 'k8s',
                workload: '',
                node,
                containerID: containerId,
                pod: pod.name,
                endpoint: 'eth0',
                interfaceName: 'npabc',
                mac: '02:00:00:00:00:01',
                ipNetworks: addresses.map((a) => `${a}/32`),
                profiles: [],
              }),
          },
        ]
      : [];
  const [allocation] = await allocate({ store, handle, node, attributes }, [{ family: 4, pools }], { companions });
  if (!allocation) throw new Error('no address allocated');
  return {
    address: allocation.address,
    handle,
    ...(pod && endpointName ? { endpointKey: keys.workloadEndpoint(pod.namespace, endpointName) } : {}),
  };
}

/** The handle holding each allocated address. */
export async function allocatedAddresses(store: Store): Promise<Map<string, string>> {
  const [v4] = (await store.read([{ list: keys.blocks(4) }])) as [Entry<unknown>[]];
  const held = new Map<string, string>();
  for (const { value: block } of checkedBlocks(v4)) {
    block.allocations.forEach((_, ordinal) => {
      const attribute = attributeAt(block, ordinal);
      if (attribute) held.set(addressOf(block, ordinal), attribute.handle_id);
    });
  }
  return held;
}

/** Whether `allocation` is held as allocated: its address by its handle, the handle and endpoint present. */
export async function isHeld(store: Store, allocation: Allocated): Promise<boolean> {
  return (
    (await allocatedAddresses(store)).get(allocation.address) === allocation.handle &&
    (await store.get(keys.handle(allocation.handle))) !== undefined
  );
}

/** Whether every trace of `allocation` is gone: address free, handle and endpoint removed. */
export async function isReleased(store: Store, allocation: Allocated): Promise<boolean> {
  if ((await allocatedAddresses(store)).has(allocation.address)) return false;
  if (await store.get(keys.handle(allocation.handle))) return false;
  return !allocation.endpointKey || (await store.get(allocation.endpointKey)) === undefined;
}
