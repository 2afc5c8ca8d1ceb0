// What every plugin command works with: the validated environment and netconf, the logger, the
// datastore and the Kubernetes API (each opened on first use and shared), the node's name, the
// workload (a pod, or a container outside Kubernetes), and the address manager the netconf chooses.

import type { Command, CniEnvironment } from '../cni/environment.ts';
import { CniError, ErrorCode } from '../cni/errors.ts';
import { isNetplugIpam } from '../config/ipam.ts';
import type { Netconf, ParsedNetconf } from '../config/netconf.ts';
import { DelegatedIpam } from '../ipam/delegated.ts';
import type { Ipam } from '../ipam/ipam.ts';
import { NetplugIpam } from '../ipam/netplug-ipam.ts';
import type { KnownNodes } from '../ipam/known-nodes.ts';
import type { Prefetched } from '../ipam/read-ahead.ts';
import { openKubeClient, type KubeClient } from '../k8s/client.ts';
import { nodePodCidrs } from '../k8s/objects.ts';
import { usesPodCidr, withAnyCidrs, withPodCidrs } from '../k8s/pod-cidr.ts';
import type { Logger } from '../log/logger.ts';
import { openStore } from '../store/open.ts';
import type { Store } from '../store/store.ts';
import { usesDatastore as storesState } from './early-datastore.ts';
import type { PodReads } from './early-kube.ts';
import { nodeName } from './nodename.ts';
import type { PluginServices } from './services.ts';
import { workloadOf, type Workload } from './workload.ts';

export interface PluginContext {
  env: CniEnvironment;
  netconf: ParsedNetconf;
  conf: Netconf;
  log: Logger;
  ipam: Ipam;
  node: string;
  /**
   * Whether this network keeps state in the datastore (workload endpoints for the policy agent):
   * with netplug-ipam, or when the netconf configures a datastore. A host-local network without
   * datastore settings runs without one.
   */
  usesDatastore: boolean;
  workload: Workload;
  /** Whether the pod's and namespace's labels and annotations are read (`policy.type` k8s, in Kubernetes mode). */
  readsPod: boolean;
  /** The pod and its namespace, read early for this very pod (or found in netplug-node's watch). */
  podReads?: PodReads;
  store(): Promise<Store>;
  /** The Kubernetes API, as `kubernetes.kubeconfig` or `kubernetes.k8s_api_root` reach it. */
  kube(): Promise<KubeClient>;
  /** A resident host's knowledge of its nodes and of the documents it wrote (spares reads). */
  known?: KnownNodes;
  /** The host's part once a pod is networked (PluginServices.workloadNetworked); none in the one-shot. */
  workloadNetworked?: PluginServices['workloadNetworked'];
  /** The host's start on that part while the addresses commit (PluginServices.workloadPlanned). */
  workloadPlanned?: PluginServices['workloadPlanned'];
  /** With a datastore, starts opening it and connecting, to overlap whatever comes first. */
  warmUp(): void;
  close(): void;
}

export interface ContextOptions {
  /**
   * The command is the plugin's (not netplug-ipam serving another plugin), so its addresses are
   * recorded with the workload endpoint they belong to, for `netplugctl ipam check`.
   */
  writesEndpoint?: boolean;
  /** The datastore, already being opened from the same settings (early work). */
  store?: Promise<Store>;
  /** The allocation's first reads, already under way (early work). */
  prefetched?: Prefetched;
  /** The Kubernetes API client and the pod's reads, already under way (early work). */
  podReads?: PodReads;
  /** A resident host's warm clients and IPAM turns (netplug-node); none in the one-shot. */
  services?: PluginServices;
}

export function createContext(env: CniEnvironment, netconf: ParsedNetconf, log: Logger, options: ContextOptions = {}): PluginContext {
  const { conf } = netconf;
  const writesEndpoint = options.writesEndpoint ?? true;
  let opened: Promise<Store> | undefined = options.store;
  const { podReads, services } = options;
  const store = () => (opened ??= services?.store?.(conf) ?? openStore(conf));
  let kubeClient: Promise<KubeClient> | undefined = podReads?.kube;
  const settings = conf.kubernetes ?? {};
  const kube = () => (kubeClient ??= services?.kube?.(settings) ?? openKubeClient(settings));
  const node = nodeName(conf.nodename);
  const usesDatastore = storesState(netconf);
  const workload = workloadOf(env, node);
  // Recorded with each address: the endpoint it belongs to (for netplugctl ipam check), and the pod.
  const attributes = {
    ...(writesEndpoint && usesDatastore ? { endpoint: `${workload.namespace}/${workload.endpointName}` } : {}),
    ...(workload.pod ? { namespace: workload.namespace, pod: workload.pod } : {}),
  };
  const known = services?.knownNodes?.(conf);
  const waiting = services?.waitingAdds?.(conf);
  const ipam: Ipam = isNetplugIpam(conf.ipam)
    ? new NetplugIpam({
        env,
        netconf,
        log: log.child('ipam'),
        store,
        node,
        workload: attributes,
        ...(options.prefetched ? { prefetched: options.prefetched } : {}),
        ...(services?.ipamTurns ? { turns: services.ipamTurns } : {}),
        ...(known ? { known } : {}),
        ...(waiting ? { waiting } : {}),
      })
    : new DelegatedIpam(env, netconf, log.child('ipam'), podCidrRewrite(netconf, workload, conf.kubernetes?.node_name ?? node, kube));
  return {
    env,
    netconf,
    conf,
    log,
    ipam,
    node,
    usesDatastore,
    workload,
    readsPod: workload.orchestrator === 'k8s' && conf.policy?.type === 'k8s',
    ...(podReads ? { podReads } : {}),
    store,
    kube,
    ...(known ? { known } : {}),
    ...(services?.workloadNetworked ? { workloadNetworked: services.workloadNetworked } : {}),
    ...(services?.workloadPlanned ? { workloadPlanned: services.workloadPlanned } : {}),
    warmUp: () => {
      if (usesDatastore)
        store().then(
          (s) => s.warmUp(),
          () => undefined,
        ); // failures surface on first use
    },
    close: () => {
      void opened?.then(
        (s) => s.close(),
        () => undefined,
      );
      void kubeClient?.then(
        (k) => k.close(),
        () => undefined,
      );
    },
  };
}

/**
 * host-local's netconf with `usePodCidr` / `usePodCidrIPv6` resolved: for ADD and CHECK, the
 * Kubernetes Node's pod CIDRs (Kubernetes mode only); for the others, any CIDR (host-local
 * releases by container). Undefined when the netconf names no pod CIDR.
 */
function podCidrRewrite(netconf: ParsedNetconf, workload: Workload, kubeNode: string, kube: () => Promise<KubeClient>) {
  if (!usesPodCidr(netconf.json)) return undefined;
  return async (command: Command): Promise<Record<string, unknown>> => {
    if (command !== 'ADD' && command !== 'CHECK') return withAnyCidrs(netconf.json);
    if (workload.orchestrator !== 'k8s') {
      throw new CniError(
        ErrorCode.InvalidConfig,
        'netconf field "ipam.subnet" is usePodCidr or usePodCidrIPv6, which needs Kubernetes mode (K8S_POD_NAMESPACE and K8S_POD_NAME in CNI_ARGS)',
      );
    }
    return withPodCidrs(netconf.json, kubeNode, async () => nodePodCidrs(await kube(), kubeNode));
  };
}
