// netplug-ipam: the address manager on the datastore, as the plugin runs it in-process and as its
// own IPAM plugin executable serves other plugins.
import type { CniEnvironment } from '../cni/environment.ts';
import { CniError, ErrorCode } from '../cni/errors.ts';
import type { Result } from '../cni/result.ts';
import type { NetplugIpamConfig } from '../config/ipam.ts';
import type { ParsedNetconf } from '../config/netconf.ts';
import type { Logger } from '../log/logger.ts';
import type { Entry, Read, Store, Write } from '../store/store.ts';
import {
  allocate,
  sameInterface,
  StaleFactsError,
  type AddressRequest,
  type Allocation,
  type Assignment,
  type Companion,
} from './allocator.ts';
import { whileUnlocked } from './cluster-info.ts';
import { releaseWhere, withdrawPendingRequest } from './release.ts';
import type { Family } from '../net/cidr.ts';
import { IpamError } from './errors.ts';
import { collectGarbage, validAttachments } from './gc.ts';
import type { AddHooks, AddressOverrides, Alongside, Ipam } from './ipam.ts';
import type { KnownNodes } from './known-nodes.ts';
import { handleId, keys } from '../model/keys.ts';
import type { AllocationAttribute } from '../model/ipam-documents.ts';
import type { NodeResource } from '../model/node.ts';
import type { PoolResource } from '../model/ip-pool.ts';
import { checkedNodeLabels } from '../model/checked-documents.ts';
import { addressRequests, requestedFamilies } from './address-requests.ts';
import { requireUsablePools } from './pool-status.ts';
import { addressesOf, knownFrom, nodeState, ownState, type KnownState } from './known-state.ts';
import { addReads, knownRelease, readAhead, readForRelease, type Prefetched, type ReadAhead } from './read-ahead.ts';
import { poolsOf, type Pool } from './pools.ts';
import { inTurnUnlessServed, underHostLock, type IpamTurns } from './turns.ts';
import { ownWrites, pendingRequest, type Served, type WaitingAdds } from './waiting-adds.ts';

export interface NetplugIpamContext {
  env: CniEnvironment;
  netconf: ParsedNetconf;
  log: Logger;
  /** The datastore, opened on first use and shared with the rest of the command. */
  store(): Promise<Store>;
  node: string;
  /** Recorded with each address besides node, interface and time: pod and namespace in Kubernetes. */
  workload?: Record<string, string>;
  /** addReads() issued early for this command, with their results to come. */
  prefetched?: Prefetched;
  /**
   * Turns per node in place of the host-wide file lock: a resident agent serializes its own
   * allocations and releases in memory, on etcd too (there its concurrent commands would otherwise
   * race for the node's block, the losers retrying; a turn in memory costs nothing). Absent: the
   * lock file where the datastore has no transactions, as separate plugin processes need.
   */
  turns?: IpamTurns;
  /** A resident agent's knowledge of its nodes, to spare reads (see known-nodes.ts). */
  known?: KnownNodes;
  /** A resident agent's ADDs waiting for their node's turn, which the ADD in the turn serves too (see waiting-adds.ts). */
  waiting?: WaitingAdds;
}

const sameReads = (a: readonly Read[], b: readonly Read[]) => JSON.stringify(a) === JSON.stringify(b);

export class NetplugIpam implements Ipam {
  readonly commitsCompanions = true;

  private readonly context: NetplugIpamContext;

  constructor(context: NetplugIpamContext) {
    this.context = context;
  }

  private get config(): NetplugIpamConfig {
    return this.context.netconf.conf.ipam as NetplugIpamConfig;
  }

  private get handle(): string {
    return handleId(this.context.netconf.conf.name, this.context.env.containerId);
  }

  private get families(): Family[] {
    return requestedFamilies(this.config);
  }

  /** Allocates this attachment's addresses, committing `companions` in the same transaction. */
  async add(companions: readonly Companion[] = [], overrides: AddressOverrides = {}, hooks: AddHooks = {}): Promise<Result> {
    const { node, known } = this.context;
    const store = await this.context.store();
    const families = this.families;
    const reads = addReads(
      this.handle,
      node,
      families,
      companions.map((c) => c.key),
    );
    // Read already, while the netconf was being validated (early work), if for the same keys.
    const prefetched = this.context.prefetched;
    const ahead =
      prefetched && sameReads(prefetched.reads, reads)
        ? await prefetched.results
        : await readAhead(store, reads, families, known && { node, nodes: known });
    if (!ahead.assumed) return this.addFrom(store, ahead, companions, overrides, hooks);
    let planned: readonly string[] = [];
    const remember: AddHooks = {
      planned: (addresses) => {
        planned = addresses;
        hooks.planned?.(addresses);
      },
    };
    try {
      return await this.addFrom(store, ahead, companions, overrides, remember);
    } catch (err) {
      // Decided on what the agent knew, and that was stale (or refused it): read, and decide again,
      // keeping what was planned if it is still free (the interface may be set up with it).
      if (!(err instanceof StaleFactsError || err instanceof CniError || err instanceof IpamError)) throw err;
      known?.forget(node);
      const fresh = await readAhead(store, reads, families, known && { node, nodes: known });
      return this.addFrom(store, fresh, companions, overrides, hooks, planned);
    }
  }

  private async addFrom(
    store: Store,
    { results, blocks, assumed, commits }: ReadAhead,
    companions: readonly Companion[],
    overrides: AddressOverrides,
    hooks: AddHooks,
    prefer: readonly string[] = [],
  ): Promise<Result> {
    const { env, node, log, known } = this.context;
    const request: Assignment = {
      store,
      handle: this.handle,
      node,
      attributes: { node, ifname: env.ifname, timestamp: new Date().toISOString(), ...this.context.workload },
    };
    const families = this.families;
    const companionKeys = companions.map((c) => c.key);
    const [poolEntries, nodeEntry, ...first] = results.slice(0, -1) as [
      Entry<PoolResource>[],
      Entry<NodeResource> | undefined,
      ...unknown[],
    ];
    // Refused while locked; else a lock landing before the commit fails it (etcd), see whileUnlocked.
    const unlocked = whileUnlocked(results.at(-1) as Entry<unknown> | undefined);
    unlocked.check(unlocked.entry);
    const pools = poolsOf(poolEntries);
    const requests = addressRequests({
      overrides,
      argIp: env.args.ip,
      families,
      config: this.config,
      pools,
      labels: nodeEntry ? checkedNodeLabels(nodeEntry) : {},
    });
    // Facts not read but known: each stated as a condition of the commit. Not the node on the
    // Kubernetes datastore: there it is the Node object, which the kubelet rewrites every few
    // seconds, and each condition costs a read; its labels are as fresh as the facts (FACTS_FRESH_MS).
    const nodeAssumption: Write[] = nodeEntry
      ? [{ key: nodeEntry.key, unchanged: nodeEntry.revision }]
      : [{ key: keys.node(node), absent: true }];
    const assumptions: Write[] = assumed
      ? [...poolEntries.map((pool) => ({ key: pool.key, unchanged: pool.revision })), ...(store.transactional ? nodeAssumption : [])]
      : [];
    const knownOwn = knownFrom(first, families, companionKeys);
    // Queued for the turn, another ADD's commit may allocate for this one (a group commit): only a
    // fresh allocation of any addresses, as the datastore's pending requests are.
    const waiting =
      this.context.waiting &&
      this.context.turns &&
      knownOwn.handle === null &&
      !known?.handle(keys.handle(this.handle)) &&
      prefer.length === 0 &&
      requests.every((r) => 'family' in r)
        ? {
            adds: this.context.waiting,
            add: this.context.waiting.wait(node, pendingRequest(request, requests), ownWrites(companions, knownOwn)),
          }
        : undefined;
    const turnOrServed = inTurnUnlessServed(
      waiting,
      (work) => this.inTurn(store, work),
      (waited) => {
        // What was read before another process's allocation is stale: read it again under the lock.
        // In an agent's turn only the node's blocks and affinities are: what belongs to this
        // attachment alone (its handle, its endpoint) changes with no other allocation, and a
        // write on it that lost a race fails its condition and is read again all the same. Stale
        // too, in an agent, is what was read before any of its commits on the node since, even
        // one whose turn had ended when this one's began (else a new block could be claimed for
        // want of knowing the one just claimed).
        const stale = waited || (known !== undefined && commits !== undefined && known.commits(node) !== commits);
        return allocate(request, requests, {
          companions,
          ...(!stale
            ? { known: knownFrom(first, families, companionKeys, blocks) }
            : this.context.turns
              ? { known: { ...nodeState(known?.fresh(node), families), ...ownState(knownFrom(first, families, companionKeys)) } }
              : {}),
          pools,
          precondition: unlocked,
          ...(assumptions.length > 0 ? { assumptions } : {}),
          ...(prefer.length > 0 ? { prefer } : {}),
          ...(known ? { committed: known.committer(node) } : {}),
          ...(hooks.planned ? { planned: tellAddresses(hooks.planned) } : {}),
          ...(this.context.waiting ? { waiting: this.context.waiting } : {}),
        });
      },
    );
    const allocating = turnOrServed.then((outcome) =>
      'served' in outcome
        ? this.completeServed(request, requests, outcome.served, { companions, pools, known: knownOwn, hooks })
        : outcome.done,
    );
    const allocations = await allocating.catch((err: unknown) => {
      // Addresses from the pod's annotation: say so, as the error may be about one of them.
      if (overrides.ips && err instanceof IpamError)
        throw new IpamError(err.code, `annotation "cni.projectnet.org/ipAddrs": ${err.message}`);
      throw err;
    });
    log.info('addresses allocated', { handle: this.handle, node, addresses: allocations.map((a) => a.address) });
    return {
      cniVersion: this.context.netconf.conf.cniVersion,
      ips: allocations.map((a) => ({ address: `${a.address}/${a.block.split('/')[1]}` })),
    };
  }

  /**
   * An ADD another's commit allocated for: done if that commit wrote its endpoint too, else it
   * writes it, outside the node's turn (no block changes), or gives its addresses back in a turn,
   * as a failed ADD leaves nothing.
   */
  private async completeServed(
    request: Assignment,
    requests: readonly AddressRequest[],
    served: Served,
    { companions, pools, known, hooks }: { companions: readonly Companion[]; pools: readonly Pool[]; known: KnownState; hooks: AddHooks },
  ): Promise<Allocation[]> {
    hooks.planned?.(served.allocations.map((a) => a.address));
    if (served.companionsWritten) return served.allocations;
    const { store, handle, node } = request;
    const committed = this.context.known?.committer(node);
    try {
      return await allocate(request, requests, {
        companions,
        known: { ...known, handle: served.handle, held: served.allocations },
        pools,
        ...(committed ? { committed } : {}),
      });
    } catch (err) {
      const mine = (attribute: AllocationAttribute) => sameInterface(attribute.secondary['ifname'], request);
      await this.inTurn(store, () => releaseWhere(store, handle, mine, undefined, undefined, committed)).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Releases this interface's addresses (a container's handle may hold another interface's too),
   * with `alongside` in the same transaction where the datastore has transactions.
   */
  async del(interfaceGone?: Promise<unknown>, alongside?: Alongside): Promise<void> {
    const ifname = this.context.env.ifname;
    const mine = ({ secondary }: AllocationAttribute) => sameInterface(secondary['ifname'], { attributes: { ifname } });
    const store = await this.context.store();
    // Read already (an agent's early work), if for this handle: used unless another went first.
    const prefetched = this.context.prefetched;
    const ours = prefetched && sameReads(prefetched.reads.slice(0, 1), [{ get: keys.handle(this.handle) }]) ? prefetched : undefined;
    // Under the lock (no transactions) or in a turn, wait for the interface first: not while holding it.
    if ((!store.transactional || this.context.turns) && interfaceGone) await Promise.allSettled([interfaceGone]);
    const first = ours && (await readForRelease(ours));
    const { known, node } = this.context;
    const committed = known?.committer(node);
    // After another's turn, what was read is stale, but what the agent knows now is not (likely).
    const released = await this.inTurn(store, async (waited) => {
      const along = store.transactional ? alongside : undefined;
      const addresses = await releaseWhere(
        store,
        this.handle,
        mine,
        interfaceGone,
        waited ? known && knownRelease(known, node, this.handle) : first,
        committed,
        along,
      );
      // Nothing released: the ADD may have been killed while it waited for another to allocate for
      // it (a committed handle means its request went with the commit). Its request is withdrawn,
      // then the handle read again: a commit serving it may have landed after the first read.
      if (addresses.length > 0 || !store.transactional) return addresses;
      await withdrawPendingRequest(store, node, this.handle);
      return releaseWhere(store, this.handle, mine, interfaceGone, undefined, committed, along);
    });
    if (released.length > 0) this.context.log.info('addresses released', { handle: this.handle, interface: ifname, addresses: released });
  }

  /** `work` in this node's turn (a resident agent's), else under the host lock where that applies (see underHostLock). */
  private inTurn<T>(store: Store, work: (waited: boolean) => Promise<T>): Promise<T> {
    const { turns, node } = this.context;
    if (!turns) return underHostLock(store, work);
    return turns(node, work);
  }

  async holdsAddresses(): Promise<boolean> {
    return (await this.held()).length > 0;
  }

  /** The addresses of this attachment (container and interface). */
  private async held(): Promise<Allocation[]> {
    const ifname = this.context.env.ifname;
    return (await addressesOf(await this.context.store(), this.handle)).filter((a) => sameInterface(a.ifname, { attributes: { ifname } }));
  }

  async check(): Promise<void> {
    const ifname = this.context.env.ifname;
    const held = await this.held();
    if (held.length === 0)
      throw new CniError(ErrorCode.CheckFailed, `netplug-ipam holds no address for ${this.handle} interface "${ifname}"`);
  }

  async gc(): Promise<void> {
    const { netconf, node, log } = this.context;
    const released = await collectGarbage(await this.context.store(), netconf.conf.name, node, validAttachments(netconf.json));
    if (released.length > 0) log.info('addresses of attachments no longer valid released', { addresses: released });
  }

  async status(): Promise<void> {
    await requireUsablePools(await this.context.store(), this.context.node, this.families, this.config);
  }
}

const tellAddresses =
  (planned: NonNullable<AddHooks['planned']>) =>
  (allocations: readonly Allocation[]): void =>
    planned(allocations.map((a) => a.address));
