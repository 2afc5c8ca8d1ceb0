// The Kubernetes Node this agent runs on, through one shared informer narrowed to its name (one
// list and watch however many subsystems read it): its labels (the etcd datastore's registration),
// its pod CIDRs (host-local), its InternalIP (the node address's autodetection). A list narrowed
// by name, not a get: a Node that does not exist yet is no error, and one permission (list, watch)
// covers every reader.
import { networkInterfaces } from 'node:os';

import * as k8s from '@kubernetes/client-node';

import type { Log } from '../../runtime/log.ts';
import type { Informer, Informers } from '../../runtime/informers.ts';
import {
  formatNodeAddress,
  nodeAddress,
  nodeAddress6,
  type Address6Setting,
  type AddressSetting,
  type Interfaces,
  type NodeAddress,
} from './node-address.ts';

export function thisNodeInformer(informers: Informers, kube: k8s.KubeConfig, name: string): Informer<k8s.V1Node> {
  const core = kube.makeApiClient(k8s.CoreV1Api);
  const fieldSelector = `metadata.name=${name}`;
  return informers.informer<k8s.V1Node>({
    what: `the Kubernetes Node "${name}"`,
    path: '/api/v1/nodes',
    list: () => core.listNode({ fieldSelector }),
    fieldSelector,
  });
}

/**
 * The node's underlay addresses as the `IP` and `IP6` settings give them, or autodetected from the
 * Kubernetes Node's InternalIPs and the interfaces (node-address.ts). One per agent, read by the
 * subsystems that route and publish them: a change is logged once.
 *
 * The interfaces are listed, and each family's address found in them, once per turn of the event
 * loop, whoever asks: a settled burst of datastore changes has each subsystem's trigger make every
 * key's view in one turn (the addresses subsystem alone reads both families for four keys), and a
 * listing walks every link of the node, a veth per pod, through netlink dumps. The next turn lists
 * them again, so no answer is older than the work that asked.
 */
export class LocalAddress {
  readonly #setting: AddressSetting;
  readonly #setting6: Address6Setting;
  readonly #name: string;
  readonly #log: Log;
  /** Autodetection only: the Node (its InternalIP), and whether it was ever read. */
  readonly #node: Informer<k8s.V1Node> | undefined;
  #read = false;
  #last: string | undefined;
  #last6: string | undefined;
  readonly #listInterfaces: () => Interfaces;
  /** This turn's listing and what was found in it (by family and InternalIPs), dropped at the next turn. */
  #turn: { interfaces: Interfaces; found: Map<string, NodeAddress | undefined | Error> } | undefined;

  constructor(options: {
    setting: AddressSetting;
    /** IP6; none when not given. */
    setting6?: Address6Setting;
    name: string;
    log: Log;
    informers: Informers;
    kube: k8s.KubeConfig;
    /** What lists the interfaces (node:os's networkInterfaces; a stand-in in tests). */
    interfaces?: () => Interfaces;
  }) {
    this.#listInterfaces = options.interfaces ?? networkInterfaces;
    this.#setting = options.setting;
    this.#setting6 = options.setting6 ?? { none: true };
    this.#name = options.name;
    this.#log = options.log;
    if ('autodetect' in options.setting || 'autodetect' in this.#setting6) {
      this.#node = thisNodeInformer(options.informers, options.kube, options.name);
      this.#node.addHandler({ synced: () => (this.#read = true) });
    }
  }

  /** Resolves once the address can be had: with autodetection, once the Node was read. */
  whenSynced(): Promise<void> {
    return this.#node?.whenSynced() ?? Promise.resolve();
  }

  /** The IPv4 address now; throws a one-line message when there is none (or the Node has not been read yet). */
  current(): NodeAddress {
    const internal = this.#internalIps('IP');
    const found = this.#find(`4 ${internal.join()}`, (interfaces) => nodeAddress(this.#setting, internal, interfaces)) as NodeAddress;
    const text = `${formatNodeAddress(found)} on ${found.interface}`;
    if (text !== this.#last) this.#log.info(`node address ${text} (from ${found.source})`);
    this.#last = text;
    return found;
  }

  /** The IPv6 address now, undefined when IP6 is none; throws as current() does. */
  current6(): NodeAddress | undefined {
    if ('none' in this.#setting6) return undefined;
    const setting6 = this.#setting6;
    const internal = this.#internalIps('IP6');
    const found = this.#find(`6 ${internal.join()}`, (interfaces) => nodeAddress6(setting6, internal, interfaces));
    const text = found && `${formatNodeAddress(found)} on ${found.interface}`;
    if (found && text !== this.#last6) this.#log.info(`node IPv6 address ${text} (from ${found.source})`);
    this.#last6 = text;
    return found;
  }

  /** What `find` makes of this turn's listing, made once per turn (a failure too, thrown to each reader). */
  #find(key: string, find: (interfaces: Interfaces) => NodeAddress | undefined): NodeAddress | undefined {
    if (!this.#turn) {
      this.#turn = { interfaces: this.#listInterfaces(), found: new Map() };
      setImmediate(() => (this.#turn = undefined));
    }
    const { interfaces, found } = this.#turn;
    if (!found.has(key)) {
      try {
        found.set(key, find(interfaces));
      } catch (err) {
        found.set(key, err as Error);
      }
    }
    const result = found.get(key);
    if (result instanceof Error) throw result;
    return result;
  }

  #internalIps(setting: 'IP' | 'IP6'): string[] {
    const node = this.#node;
    if (node && !this.#read && !node.synced())
      throw new Error(`${setting} is autodetect: waiting for the Kubernetes Node "${this.#name}" to be read for its InternalIP`);
    return (node?.get(this.#name)?.status?.addresses ?? []).filter((a) => a.type === 'InternalIP').map((a) => a.address);
  }
}
