// The node controller's automatic host endpoints, one level-triggered, idempotent reconcile: it
// reads KubeControllersConfiguration default (creating it, autoCreate Disabled, when absent) and
// every HostEndpoint, and when autoCreate is Enabled makes the automatic ones match the
// Kubernetes Nodes: one `<node>-auto-hep` per node, on all interfaces ("*"), with the node's
// labels plus projectnet.org/created-by, the node's InternalIP addresses as expectedIPs (netplug
// gives nodes no tunnel addresses) and the allow-all profile. When autoCreate is Disabled, or a
// node is gone, its automatic host endpoint is deleted. Host endpoints without the created-by
// label are never changed. It records what it ran with in status.runningConfig.
import type * as k8s from '@kubernetes/client-node';

import type { Entry, Store } from '../store/store.ts';
import {
  ALL_INTERFACES,
  CREATED_BY,
  CREATED_BY_LABEL,
  DEFAULT_ALLOW_PROFILE,
  hostEndpointKey,
  isAutomatic,
  type HostEndpoint,
} from '../model/host-endpoint.ts';
import {
  autoCreateOf,
  autoCreateSpec,
  CONFIGURATION_KEY,
  CONFIGURATION_NAME,
  type AutoCreate,
  type ControllersConfiguration,
} from '../model/kube-controllers-configuration.ts';
import { autoHostEndpointName, listHostEndpoints, newDocument, readConfiguration } from './auto-host-endpoints-resources.ts';
import type { Log } from '../runtime/log.ts';

export interface AutoHostEndpointsState {
  store: Store;
  /** Every Kubernetes Node, once the cache holds a complete list; undefined before. */
  nodes: () => readonly k8s.V1Node[] | undefined;
  /** A fresh GET: the cache may not have seen a new node yet. */
  nodeExists: (name: string) => Promise<boolean>;
  log: Log;
  /** Host endpoints in the way of an automatic one, reported once each. */
  reported: Set<string>;
}

/** The host endpoint the controllers keep for `node`. */
function autoHostEndpointOf(node: k8s.V1Node): { name: string; labels: Record<string, string>; spec: HostEndpoint['spec'] } {
  const nodeName = node.metadata?.name ?? '';
  const expectedIPs = [
    ...new Set((node.status?.addresses ?? []).filter((address) => address.type === 'InternalIP').map((address) => address.address)),
  ];
  return {
    name: autoHostEndpointName(nodeName),
    labels: { ...node.metadata?.labels, [CREATED_BY_LABEL]: CREATED_BY },
    spec: { node: nodeName, interfaceName: ALL_INTERFACES, expectedIPs, profiles: [DEFAULT_ALLOW_PROFILE] },
  };
}

export async function reconcileAutoHostEndpoints(state: AutoHostEndpointsState): Promise<void> {
  const { store, log } = state;
  const configuration = await ensureConfiguration(store, log);
  const autoCreate = autoCreateOf(configuration.value.spec);
  let conflicts = (await recordRunningConfig(store, configuration, autoCreate)) ? 0 : 1;

  const nodes = state.nodes();
  // Enabled: nothing is created or deleted until the cache holds every node.
  if (autoCreate === 'Enabled' && !nodes) return;
  const endpoints = new Map((await listHostEndpoints(store)).map((entry) => [entry.value.metadata.name, entry]));
  const wanted = new Map(
    (autoCreate === 'Enabled' ? (nodes ?? []) : []).map((node) => [autoHostEndpointName(node.metadata?.name ?? ''), node]),
  );

  for (const [name, node] of wanted) {
    const want = autoHostEndpointOf(node);
    const have = endpoints.get(name);
    if (have && !isAutomatic(have.value)) {
      if (!state.reported.has(name))
        log.warning(
          `host endpoint ${name} exists without label ${CREATED_BY_LABEL}=${CREATED_BY}: left alone, so node ${want.spec.node} has no automatic host endpoint until it is removed`,
        );
      state.reported.add(name);
      continue;
    }
    state.reported.delete(name);
    if (!have) {
      const created = await store.commit([
        { key: hostEndpointKey(name), create: newDocument('HostEndpoint', name, want.labels, want.spec) },
      ]);
      if (created) log.info(`created host endpoint ${name} for node ${want.spec.node} (expected IPs ${list(want.spec.expectedIPs)})`);
      else conflicts++;
    } else if (!same(have.value, want)) {
      const value = { ...have.value, metadata: { ...have.value.metadata, labels: want.labels }, spec: want.spec };
      if (await store.commit([{ key: have.key, update: value, revision: have.revision }]))
        log.info(
          `updated host endpoint ${name} to node ${want.spec.node}'s labels and addresses (expected IPs ${list(want.spec.expectedIPs)})`,
        );
      else conflicts++;
    }
  }

  for (const [name, have] of endpoints) {
    if (!isAutomatic(have.value) || wanted.has(name)) continue;
    const node = have.value.spec.node ?? '';
    const cached = nodes?.some((n) => n.metadata?.name === node) ?? false;
    // A node missing from the cache is confirmed gone by the API server first.
    if (autoCreate === 'Enabled' && node && !cached && (await state.nodeExists(node))) continue;
    const why =
      autoCreate === 'Disabled'
        ? 'autoCreate is Disabled'
        : cached
          ? `not the automatic host endpoint of node ${node} (${autoHostEndpointName(node)})`
          : `node ${node || '(none)'} was deleted`;
    if (await store.commit([{ key: have.key, remove: true, revision: have.revision }])) log.info(`deleted host endpoint ${name}: ${why}`);
    else conflicts++;
  }
  if (conflicts > 0) throw new Error(`${conflicts} host endpoint or configuration write(s) lost to concurrent writers`);
}

/** KubeControllersConfiguration default, created with autoCreate Disabled when absent. */
async function ensureConfiguration(store: Store, log: Log): Promise<Entry<ControllersConfiguration>> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const found = await readConfiguration(store);
    if (found) return found;
    const value = newDocument('KubeControllersConfiguration', CONFIGURATION_NAME, undefined, autoCreateSpec('Disabled'));
    if (await store.commit([{ key: CONFIGURATION_KEY, create: value }]))
      log.info('created KubeControllersConfiguration default (autoCreate Disabled)');
  }
  throw new Error('KubeControllersConfiguration default keeps appearing and disappearing');
}

/** status.runningConfig as the controllers run; false if the configuration changed meanwhile (the next pass sees it). */
async function recordRunningConfig(store: Store, configuration: Entry<ControllersConfiguration>, autoCreate: AutoCreate): Promise<boolean> {
  const runningConfig = autoCreateSpec(autoCreate);
  const status = configuration.value.status;
  if (JSON.stringify(status?.runningConfig) === JSON.stringify(runningConfig)) return true;
  const value = { ...configuration.value, status: { ...status, runningConfig } };
  return store.commit([{ key: configuration.key, update: value, revision: configuration.revision }]);
}

/** Whether an automatic host endpoint already is what the controllers want. */
function same(have: HostEndpoint, want: ReturnType<typeof autoHostEndpointOf>): boolean {
  const sorted = (labels: Record<string, string> = {}) => JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)));
  const { node, interfaceName, expectedIPs, profiles, ports } = have.spec;
  return (
    sorted(have.metadata.labels) === sorted(want.labels) &&
    JSON.stringify([node, interfaceName, expectedIPs, profiles, ports]) ===
      JSON.stringify([want.spec.node, want.spec.interfaceName, want.spec.expectedIPs, want.spec.profiles, undefined])
  );
}

const list = (addresses: readonly string[] = []) => (addresses.length > 0 ? addresses.join(',') : 'none');
