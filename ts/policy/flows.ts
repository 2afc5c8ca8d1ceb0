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
import { parseFlowPrefix } from './flow-prefix.ts';
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
}

interface Tracked {
  /** The connection's tuple (what conntrack is looked up by). */
  connection: string;
  key: string;
  identity: FlowIdentity;
  /** Packets and bytes counted so far. */
  packets: number;
  bytes: number;
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
  readonly #tracked = new Map<string, Tracked>();
  #start: number | undefined;

  constructor(options: FlowAggregatorOptions) {
    this.#options = options;
  }

  /** A packet of the flow-log group at `now`; returns its record, or undefined for a packet that is not a flow log's. */
  packet(packet: LoggedFlowPacket, now: number): FlowRecord | undefined {
    const decision = parseFlowPrefix(packet.prefix);
    const { source, destination, protocol } = packet;
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
    const reporter = decision.direction === 'ingress' ? 'dst' : 'src';
    const key = [source, destination, protocol, packet.destinationPort, reporter, policy.policy, policy.rule, policy.tier].join('|');
    this.#start ??= now;
    let open = this.#open.get(key);
    if (!open) {
      const lookup = this.#options.lookup;
      const identity: FlowIdentity = {
        node: this.#options.node,
        source: lookup.end(source),
        destination: lookup.end(destination, packet.destinationPort),
        protocol,
        reporter,
        action: policy.action,
        policy,
      };
      open = this.#opened(key, identity, now, policy.action === 'Deny');
    }
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
      const connection = connectionKey(protocol, source, packet.sourcePort, destination, packet.destinationPort);
      const tracking = `${connection} ${reporter}`;
      if (!this.#tracked.has(tracking) && this.#tracked.size < (this.#options.maxTracked ?? 100_000))
        this.#tracked.set(tracking, { connection, key, identity: open.identity, packets: 0, bytes: 0 });
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
    const byTuple = new Map<string, TrackedConnection>();
    for (const c of connections) {
      byTuple.set(connectionKey(c.protocol, c.source, c.sourcePort, c.destination, c.destinationPort), c);
      // Seen after DNAT (in forward), the packet's destination is the reply's source.
      byTuple.set(connectionKey(c.protocol, c.source, c.sourcePort, c.replySource, c.replySourcePort), c);
    }
    for (const [tracking, tracked] of this.#tracked) {
      const found = byTuple.get(tracked.connection);
      if (!found) {
        this.#tracked.delete(tracking);
        continue;
      }
      const packets = Math.max(0, found.packets - tracked.packets);
      const bytes = Math.max(0, found.bytes - tracked.bytes);
      tracked.packets = found.packets;
      tracked.bytes = found.bytes;
      if (packets === 0 && bytes === 0) continue;
      const { record } = this.#open.get(tracked.key) ?? this.#opened(tracked.key, tracked.identity, start, false);
      record.packets += packets;
      record.bytes += bytes;
    }
    const records = [...this.#open.values()].map(({ record }) => ({ ...record, start, end: now }));
    this.#open = new Map();
    this.#start = undefined;
    return records;
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

const connectionKey = (
  protocol: number,
  source: string,
  sourcePort: number | undefined,
  destination: string,
  destinationPort: number | undefined,
) => `${protocol} ${normal(source)} ${sourcePort ?? ''} ${normal(destination)} ${destinationPort ?? ''}`;

/** One text per address (conntrack and NFLOG may write IPv6 differently). */
function normal(address: string): string {
  const found = netInterval(address);
  return found ? formatIp(found.family as Family, found.interval.start) : address;
}
