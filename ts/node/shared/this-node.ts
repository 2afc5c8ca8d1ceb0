// The Kubernetes Node this agent runs on, through one shared informer narrowed to its name (one
// list and watch however many subsystems read it): its labels (the etcd datastore's registration),
// its pod CIDRs (host-local), its InternalIP (the node address's autodetection). A list narrowed
// by name, not a get: a Node that does not exist yet is no error, and one permission (list, watch)
// covers every reader.
import { performance } from 'node:perf_hooks';

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
import { listInterfaces } from './list-interfaces.ts';

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

/** How old a listing of the interfaces may be when read: a read after that lists them again (off the event loop). */
const LISTING_MAX_AGE_MS = 1000;

/**
 * The node's underlay addresses as the `IP` and `IP6` settings give them, or autodetected from the
 * Kubernetes Node's InternalIPs and the interfaces (node-address.ts). One per agent, read by the
 * subsystems that route and publish them: a change is logged once.
 *
 * Reads are synchronous (a subsystem's trigger makes every key's view at once) and answer from the
 * last listing of the interfaces, which the data-plane addon makes on one of its threads
 * (list-interfaces.ts): a listing walks every link of the node, a veth per pod, and can wait on
 * the kernel. A read finding the listing older than LISTING_MAX_AGE_MS starts the next one, so a
 * burst of datastore changes lists the interfaces at most about once a second; a listing in which
 * a read's answer differs (not merely another pod's veth) tells `onChange`'s listeners, whose
 * subsystems then look again with it.
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
  readonly #listInterfaces: () => Interfaces | Promise<Interfaces>;
  readonly #now: () => number;
  /** The last listing and what was found in it (by family and InternalIPs). */
  #listing: { interfaces: Interfaces; found: Map<string, Found> } | undefined;
  /** When the last listing was asked for (none after a failure: the next read asks again). */
  #listedAt = Number.NEGATIVE_INFINITY;
  /** The listing under way. */
  #listingNow: Promise<void> | undefined;
  /** Why the last listing failed, while there is none to answer from. */
  #failure: Error | undefined;
  readonly #listeners = new Set<() => void>();

  constructor(options: {
    setting: AddressSetting;
    /** IP6; none when not given. */
    setting6?: Address6Setting;
    name: string;
    log: Log;
    informers: Informers;
    kube: k8s.KubeConfig;
    /** What lists the interfaces (list-interfaces.ts; a stand-in in tests). */
    interfaces?: () => Interfaces | Promise<Interfaces>;
    /** The clock of the listing's age (performance.now; a stand-in in tests). */
    now?: () => number;
  }) {
    this.#listInterfaces = options.interfaces ?? listInterfaces;
    this.#now = options.now ?? (() => performance.now());
    this.#setting = options.setting;
    this.#setting6 = options.setting6 ?? { none: true };
    this.#name = options.name;
    this.#log = options.log;
    if ('autodetect' in options.setting || 'autodetect' in this.#setting6) {
      this.#node = thisNodeInformer(options.informers, options.kube, options.name);
      this.#node.addHandler({ synced: () => (this.#read = true) });
    }
  }

  /** Resolves once the address can be had: the interfaces listed once and, with autodetection, the Node read. */
  async whenSynced(): Promise<void> {
    await Promise.all([this.#node?.whenSynced(), this.#list()]);
  }

  /** Calls `listener` when a listing changes an address read before (or its error); returns its removal. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
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

  /** Lists the interfaces (one listing at a time); never rejects: a failure is kept for the reads. */
  #list(): Promise<void> {
    this.#listingNow ??= this.#listOnce();
    return this.#listingNow;
  }

  async #listOnce(): Promise<void> {
    this.#listedAt = this.#now();
    // After the caller's turn: `#listingNow` is set before this ends, however the lister returns.
    await Promise.resolve();
    try {
      const interfaces = await this.#listInterfaces();
      const before = this.#listing;
      this.#failure = undefined;
      // Every pod's veth is in the listing: what was found is looked for again, and only a
      // different answer is a move the listeners hear of.
      const found = new Map<string, Found>();
      let moved = false;
      for (const [key, was] of before?.found ?? []) {
        const now = search(was.find, interfaces);
        found.set(key, now);
        moved ||= now.text !== was.text;
      }
      this.#listing = { interfaces, found };
      if (moved) for (const listener of this.#listeners) listener();
    } catch (err) {
      // The last listing, if any, still answers; the next read past its age tries again.
      this.#failure = err instanceof Error ? err : new Error(String(err));
      this.#listedAt = Number.NEGATIVE_INFINITY;
    } finally {
      this.#listingNow = undefined;
    }
  }

  /** What `find` makes of the last listing, made once per listing (a failure too, thrown to each reader). */
  #find(key: string, find: (interfaces: Interfaces) => NodeAddress | undefined): NodeAddress | undefined {
    if (this.#now() - this.#listedAt > LISTING_MAX_AGE_MS) void this.#list();
    const listing = this.#listing;
    if (!listing) throw this.#failure ?? new Error("the node's interfaces are not listed yet");
    const { interfaces, found } = listing;
    let result = found.get(key);
    if (!result) {
      result = search(find, interfaces);
      found.set(key, result);
    }
    if (result.answer instanceof Error) throw result.answer;
    return result.answer;
  }

  #internalIps(setting: 'IP' | 'IP6'): string[] {
    const node = this.#node;
    if (node && !this.#read && !node.synced())
      throw new Error(`${setting} is autodetect: waiting for the Kubernetes Node "${this.#name}" to be read for its InternalIP`);
    return (node?.get(this.#name)?.status?.addresses ?? []).filter((a) => a.type === 'InternalIP').map((a) => a.address);
  }
}

/** What a search of a listing found (or the error it threw), its text to tell a move, and the search, to search the next listing. */
interface Found {
  find: (interfaces: Interfaces) => NodeAddress | undefined;
  answer: NodeAddress | undefined | Error;
  text: string;
}

function search(find: Found['find'], interfaces: Interfaces): Found {
  let answer: Found['answer'];
  try {
    answer = find(interfaces);
  } catch (err) {
    answer = err instanceof Error ? err : new Error(String(err));
  }
  const text = answer instanceof Error ? `error ${answer.message}` : answer ? `${formatNodeAddress(answer)} ${answer.interface}` : 'none';
  return { find, answer, text };
}
