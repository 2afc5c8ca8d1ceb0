// Flow logs from what the kernel tells: each packet a deciding rule logged to the flow-log group
// (flow-prefix.ts) is a new flow's first packet at one end (a denied one: every packet tried), and
// at each interval's end the connections allowed are read back from connection tracking for their
// packets and bytes. Records are per interval and per (source, destination, protocol, destination
// port, reporter, verdict, deciding policy and rule); an allowed connection's packets and bytes
// count in every interval it moved in. Pure: the agent (ts/node/policy/record-flows.ts) gives the
// packets, the connections and the time.
import type { FlowEnd, FlowPolicy, FlowRecord } from '../model/flow.ts';
import { formatIp } from '../net/cidr.ts';
import { netInterval, type Family } from './addresses.ts';
import type { AddressedEntity } from './engine.ts';
import { parseFlowPrefix, type FlowDecision } from './flow-prefix.ts';
import { memoized } from './memo.ts';
import { hashOf } from './names.ts';

/** A packet logged to the flow-log group (the addon's NFLOG packet). */
export interface LoggedFlowPacket {
  prefix: string;
  protocol?: number;
  source?: string;
  destination?: string;
  sourcePort?: number;
  destinationPort?: number;
  /** Its length in bytes. */
  length?: number;
}

/** A tracked connection as conntrack gives it (packets and bytes of both directions). */
export interface TrackedConnection {
  protocol: number;
  source: string;
  destination: string;
  sourcePort?: number;
  destinationPort?: number;
  /** The reply's source: the destination after DNAT. */
  replySource: string;
  replySourcePort?: number;
  packets: number;
  bytes: number;
}

/** What the aggregator reads of the engine: its entities and programs, and when they changed. */
export interface FlowSource {
  readonly generation: number;
  addressedEntities(): Iterable<AddressedEntity>;
  programKeys(): Iterable<{ key: string; tier?: string }>;
}

/** Names addresses and policy hashes from the engine's inputs, made again when they changed. */
export class FlowLookup {
  readonly #source: FlowSource;
  #generation = -1;
  #byAddress = new Map<string, AddressedEntity>();
  #nets: AddressedEntity[] = [];
  #policies = new Map<string, { key: string; tier?: string }>();

  constructor(source: FlowSource) {
    this.#source = source;
  }

  /** The end at `address` (and `port`), named by the pod, host endpoint or network set it belongs to. */
  end(address: string, port?: number): FlowEnd {
    this.#refresh();
    const found = netInterval(address);
    const at = found ? `${found.family}:${found.interval.start}` : address;
    const entity =
      this.#byAddress.get(at) ??
      (found
        ? this.#nets.find((net) => net.addresses.some((a) => a.family === found.family && contains(a.interval, found.interval.start)))
        : undefined);
    const canonical = found ? formatIp(found.family, found.interval.start) : address;
    return {
      address: canonical,
      ...(port !== undefined ? { port } : {}),
      kind: entity?.kind ?? 'external',
      ...(entity?.namespace !== undefined ? { namespace: entity.namespace } : {}),
      ...(entity ? { name: entity.name, labels: { ...entity.labels } } : {}),
    };
  }

  /** The policy or profile whose key hashes to `hash`. */
  policy(hash: string): { key: string; tier?: string } | undefined {
    this.#refresh();
    return this.#policies.get(hash);
  }

  #refresh(): void {
    if (this.#generation === this.#source.generation) return;
    this.#generation = this.#source.generation;
    this.#byAddress = new Map();
    this.#nets = [];
    for (const entity of this.#source.addressedEntities()) {
      if (entity.kind === 'net') this.#nets.push(entity);
      else for (const a of entity.addresses) this.#byAddress.set(`${a.family}:${a.interval.start}`, entity);
    }
    this.#policies = new Map();
    for (const program of this.#source.programKeys()) this.#policies.set(hashOf(program.key), program);
  }
}

const contains = (interval: { start: bigint; end: bigint }, value: bigint) => interval.start <= value && value <= interval.end;

/** A record without its interval and counts: what one (ends, protocol, port, reporter, policy) is. */
type FlowIdentity = Omit<FlowRecord, 'start' | 'end' | 'flows' | 'packets' | 'bytes'>;

interface OpenRecord {
  identity: FlowIdentity;
  record: FlowRecord;
  /** Denied: the source ports seen, each a connection attempt. */
  attempts?: Set<number | undefined>;
  /** Allowed: where the record's connections are followed. */
  followed?: Followed;
}

/**
 * The allowed connections of one record's key, followed in connection tracking for their packets
 * and bytes: one per (ends, protocol, destination port, deciding rule), its connections by source
 * port, so that a packet adds a number to a map rather than a key of its own.
 */
interface Followed {
  key: string;
  identity: FlowIdentity;
  /** `protocol source destination port` (canonical addresses), what conntrack entries are matched by. */
  ends: string;
  /** Packets and bytes counted so far, by the connection's source port. */
  ports: Map<number | undefined, { packets: number; bytes: number }>;
}

export interface FlowAggregatorOptions {
  node: string;
  lookup: FlowLookup;
  /** Connections followed for their counts at most (more are counted as flows only). */
  maxTracked?: number;
}

export class FlowAggregator {
  readonly #options: FlowAggregatorOptions;
  #open = new Map<string, OpenRecord>();
  /** Followed connections by record key, and the same by ends (several reporters may share ends). */
  readonly #followed = new Map<string, Followed>();
  readonly #byEnds = new Map<string, Followed[]>();
  #tracked = 0;
  #start: number | undefined;
  // Every packet is keyed by its prefix and addresses, and a node sees the same few of each over
  // and over: each parsed once (the parse was most of a packet's cost).
  readonly #decision = memoized<FlowDecision | undefined>(parseFlowPrefix, 4096);
  readonly #normal = memoized(normal, 65_536);

  constructor(options: FlowAggregatorOptions) {
    this.#options = options;
  }

  /** A packet of the flow-log group at `now`; returns its record, or undefined for a packet that is not a flow log's. */
  packet(packet: LoggedFlowPacket, now: number): FlowRecord | undefined {
    const { prefix, source, destination, protocol, destinationPort } = packet;
    if (source === undefined || destination === undefined || protocol === undefined) return undefined;
    // The prefix says the reporter, the verdict and the deciding rule: with the ends, the record's key.
    const key = `${prefix}|${source}|${destination}|${protocol}|${destinationPort}`;
    this.#start ??= now;
    const open = this.#open.get(key) ?? this.#openFor(key, packet, now);
    if (!open) return undefined;
    const { record } = open;
    record.end = now;
    if (open.attempts) {
      // A denied connection's packets are all logged: counted here, its attempts by source port.
      open.attempts.add(packet.sourcePort);
      record.flows = open.attempts.size;
      record.packets++;
      record.bytes += packet.length ?? 0;
    } else {
      record.flows++;
      // Followed once per reporter: both ends' records of a connection on this node count it.
      const followed = open.followed;
      if (followed && !followed.ports.has(packet.sourcePort) && this.#tracked < (this.#options.maxTracked ?? 100_000)) {
        followed.ports.set(packet.sourcePort, { packets: 0, bytes: 0 });
        this.#tracked++;
      }
    }
    return record;
  }

  /**
   * The records of the interval ending `now`; allowed ones with what their connections moved since
   * the last flush (`connections`: conntrack as it is now; a connection it no longer holds is
   * followed no more, one of an earlier interval that moved gives a record with no new flow).
   */
  flush(now: number, connections: readonly TrackedConnection[]): FlowRecord[] {
    const start = this.#start ?? now;
    const seen = new Map<Followed, Set<number | undefined>>();
    const count = (ends: string, c: TrackedConnection) => {
      for (const followed of this.#byEnds.get(ends) ?? []) {
        const counted = followed.ports.get(c.sourcePort);
        if (!counted) continue;
        const ports = seen.get(followed) ?? new Set<number | undefined>();
        seen.set(followed, ports);
        if (ports.has(c.sourcePort)) continue;
        ports.add(c.sourcePort);
        const packets = Math.max(0, c.packets - counted.packets);
        const bytes = Math.max(0, c.bytes - counted.bytes);
        counted.packets = c.packets;
        counted.bytes = c.bytes;
        if (packets === 0 && bytes === 0) continue;
        const { record } = this.#open.get(followed.key) ?? this.#opened(followed.key, followed.identity, start, false);
        record.packets += packets;
        record.bytes += bytes;
      }
    };
    for (const c of connections) {
      count(this.#ends(c.protocol, c.source, c.destination, c.destinationPort), c);
      // Seen after DNAT (in forward), the packet's destination is the reply's source.
      if (c.replySource !== c.destination || c.replySourcePort !== c.destinationPort)
        count(this.#ends(c.protocol, c.source, c.replySource, c.replySourcePort), c);
    }
    // Connections conntrack no longer holds are followed no more.
    for (const followed of this.#followed.values()) {
      const kept = seen.get(followed);
      for (const port of followed.ports.keys())
        if (!kept?.has(port)) {
          followed.ports.delete(port);
          this.#tracked--;
        }
      if (followed.ports.size === 0) this.#unfollow(followed);
    }
    const records = [...this.#open.values()].map(({ record }) => ({ ...record, start, end: now }));
    this.#open = new Map();
    this.#start = undefined;
    return records;
  }

  /** The record a packet with a new key opens: its ends and deciding rule named (undefined: not a flow log's prefix). */
  #openFor(key: string, packet: LoggedFlowPacket, now: number): OpenRecord | undefined {
    const decision = this.#decision(packet.prefix);
    const { source, destination, protocol, destinationPort } = packet;
    if (!decision || source === undefined || destination === undefined || protocol === undefined) return undefined;
    let policy: FlowPolicy;
    if ('policyHash' in decision) {
      const found = this.#options.lookup.policy(decision.policyHash);
      policy = {
        policy: found?.key ?? `unknown/${decision.policyHash}`,
        ...(found?.tier ? { tier: found.tier } : {}),
        rule: decision.rule,
        action: decision.action,
      };
    } else policy = { policy: 'default-deny', ...('tier' in decision ? { tier: decision.tier } : {}), action: 'Deny' };
    const lookup = this.#options.lookup;
    const identity: FlowIdentity = {
      node: this.#options.node,
      source: lookup.end(source),
      destination: lookup.end(destination, destinationPort),
      protocol,
      reporter: decision.direction === 'ingress' ? 'dst' : 'src',
      action: policy.action,
      policy,
    };
    const open = this.#opened(key, identity, now, policy.action === 'Deny');
    if (policy.action !== 'Deny') open.followed = this.#follow(key, identity, this.#ends(protocol, source, destination, destinationPort));
    return open;
  }

  #follow(key: string, identity: FlowIdentity, ends: string): Followed {
    const existing = this.#followed.get(key);
    if (existing) {
      // Named afresh each interval: the ends' labels may have changed.
      existing.identity = identity;
      return existing;
    }
    const followed: Followed = { key, identity, ends, ports: new Map() };
    this.#followed.set(key, followed);
    const sharing = this.#byEnds.get(ends);
    if (sharing) sharing.push(followed);
    else this.#byEnds.set(ends, [followed]);
    return followed;
  }

  #unfollow(followed: Followed): void {
    this.#followed.delete(followed.key);
    const sharing = this.#byEnds.get(followed.ends)?.filter((other) => other !== followed) ?? [];
    if (sharing.length > 0) this.#byEnds.set(followed.ends, sharing);
    else this.#byEnds.delete(followed.ends);
  }

  #ends(protocol: number, source: string, destination: string, destinationPort: number | undefined): string {
    return `${protocol} ${this.#normal(source)} ${this.#normal(destination)} ${destinationPort ?? ''}`;
  }

  #opened(key: string, identity: FlowIdentity, now: number, denied: boolean): OpenRecord {
    const open: OpenRecord = {
      identity,
      record: { ...identity, start: this.#start ?? now, end: now, flows: 0, packets: 0, bytes: 0 },
      ...(denied ? { attempts: new Set<number | undefined>() } : {}),
    };
    this.#open.set(key, open);
    return open;
  }
}

/** One text per address (conntrack and NFLOG may write IPv6 differently). */
function normal(address: string): string {
  const found = netInterval(address);
  return found ? formatIp(found.family as Family, found.interval.start) : address;
}
