// What a resident host (netplug-node) lends the plugin's core: warm datastore and Kubernetes
// clients, and an in-memory turn per node in place of the host-wide IPAM file lock. The one-shot
// executable passes none and opens everything per command. Types only: the one-shot loads nothing
// more for them.
import type { Netconf } from '../config/netconf.ts';
import type { KnownNodes } from '../ipam/known-nodes.ts';
import type { IpamTurns } from '../ipam/turns.ts';
import type { WaitingAdds } from '../ipam/waiting-adds.ts';
import type { KubeClient } from '../k8s/client.ts';
import type { KubernetesSettings } from '../k8s/kubeconfig.ts';
import type { NamespaceInfo, PodInfo } from '../k8s/objects.ts';
import type { SharedLogFile } from '../log/logger.ts';
import type { Store } from '../store/store.ts';

/** Which program served a command, as every plugin log line says (`via=...`). */
type Via = 'netplug-node' | 'one-shot';

/** A pod's attachment as an ADD made it: what the host's policy needs to police it. */
export interface NetworkedWorkload {
  namespace: string;
  pod: string;
  /** K8S_POD_UID of CNI_ARGS, when the runtime gives it. */
  podUid?: string;
  containerInterface: string;
  hostInterface: string;
  /** The pod end's MAC. */
  mac: string;
  /** The pod's addresses, without prefix length. */
  addresses: readonly string[];
}

export interface PluginServices {
  via: Via;
  /**
   * A shared, open store for this netconf's datastore (its `close()` does nothing), or undefined
   * to open one for the command from the netconf's own settings.
   */
  store?(conf: Netconf): Promise<Store> | undefined;
  /** Likewise a shared client for the Kubernetes API these settings reach (the pod's reads). */
  kube?(settings: KubernetesSettings): Promise<KubeClient> | undefined;
  /**
   * The pod and its namespace as the host's watch holds them (ts/node/watch-pods.ts), if it holds
   * the pod of this uid and is in step with the API; else undefined, and the command reads them. A
   * uid names one pod of one cluster, so a pod found is the one the runtime is adding.
   */
  watchedPod?(namespace: string, name: string, uid: string): [PodInfo, NamespaceInfo] | undefined;
  /** The netconf's log file kept open between commands, instead of opened (and its rotations pruned) by each. */
  logFile?: SharedLogFile;
  /** Turns per node for the address manager's allocations and releases, instead of the host-wide lock file. */
  ipamTurns?: IpamTurns;
  /**
   * What the host knows of its nodes' address state between commands, to spare reads
   * (ts/ipam/known-nodes.ts): for its own datastore only (a revision means nothing in another).
   */
  knownNodes?(conf: Netconf): KnownNodes | undefined;
  /** ADDs waiting for their node's turn, for a group commit (ts/ipam/waiting-adds.ts): for its own datastore only, as knownNodes. */
  waitingAdds?(conf: Netconf): WaitingAdds | undefined;
  /**
   * Takes work the command's result need not wait for (a veth whose deletion the kernel is still
   * finishing, after its routes are gone and its addresses released): the host keeps running until
   * it ends and logs its failure, naming it by `what`. Without it (the one-shot) the command waits:
   * a process must not exit with a thread in the kernel.
   */
  lingering?(work: Promise<unknown>, what: string): void;
  /**
   * Told once a pod's interface and addresses are in place, before the policy wait and the answer:
   * the host puts in place what the pod needs besides them (netplug-node's network policy), so
   * that the pod's first packet meets it and the wait finds its status file at once. A failure
   * fails the ADD, which then undoes what it did: no pod starts without what this had to put in place.
   */
  workloadNetworked?(workload: NetworkedWorkload): Promise<void>;
  /**
   * Told once an ADD's addresses are planned, while they are committed and the interface is set
   * up: the host may start on what workloadNetworked will need for them (netplug-node writes the
   * pod's policy meanwhile), which that call then finds done. Returns what the ADD calls if it
   * fails: what was begun for addresses the pod may not keep goes. It must not throw.
   */
  workloadPlanned?(workload: NetworkedWorkload): () => void;
}
