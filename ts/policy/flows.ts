// Flow logs from what the kernel tells. Allowed connections are counted by the addon's flow
// tracker from connection tracking, where the rule that allowed each one wrote its number
// (flow-decisions.ts): per interval, the connections new in it and what they all moved. Denied
// ones never enter connection tracking: each packet a Deny rule (or a drop no rule decided) logged
// to the flow-log group (flow-prefix.ts) is an attempt. Records are per interval and per (source,
// destination, protocol, destination port, reporter, verdict, deciding policy and rule). Pure: the
// agent (ts/node/policy/record-flows.ts) gives the counts, the packets and the time.
import type { FlowEnd, FlowPolicy, FlowRecord } from '../model/flow.ts';
import { formatIp } from '../net/cidr.ts';
import { netInterval } from './addresses.ts';
import type { AddressedEntity } from './engine.ts';
import { UNNAMED, type MarkedRule } from './flow-decisions.ts';
import { parseFlowPrefix, type FlowDecision as LoggedDecision } from './flow-prefix.ts';
import { memoized } from './memo.ts';
import { hashOf } from './names.ts';
import type { Direction } from './program.ts';

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

/** What the flow tracker counted of one (ends, protocol, destination port, deciding rule) in an interval (the addon's TrackedFlowCount). */
export interface CountedFlow {
  protocol: number;
  source: string;
  /** After destination NAT: the address the deciding rule saw. */
  destination: string;
  destinationPort?: number;
  /** Decided at the destination's end, else at the source's. */
  ingress: boolean;
  /** The deciding rule's number (flow-decisions.ts). */
  decision: number;
  /** Connections new in the interval. */
  flows: number;
  packets: number;
  bytes: number;
}

/** What the aggregator reads of the engine: its entities and programs, and when they changed. */
export interface FlowSource {
  readonly generation: number;
  addressedEntities(): Iterable<AddressedEntity>;
  programKeys(): Iterable<{ key: string; tier?: string }>;
  flowDecision(direction: Direction, number: number): MarkedRule | undefined;
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

  /** The rule a connection mark's number names. */
  decision(direction: Direction, number: number): (MarkedRule & { key?: string; tier?: string }) | undefined {
    const decision = this.#source.flowDecision(direction, number);
    return decision && { ...decision, ...this.policy(decision.policyHash) };
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
  record: FlowRecord;
  /** Denied: the source ports seen, each a connection attempt. */
  attempts?: Set<number | undefined>;
}

export interface FlowAggregatorOptions {
  node: string;
  lookup: FlowLookup;
}

export class FlowAggregator {
  readonly #options: FlowAggregatorOptions;
  #open = new Map<string, OpenRecord>();
  #start: number | undefined;
  // Every denied packet is keyed by its prefix and addresses, and a node sees the same few of each
  // over and over: each parsed once.
  readonly #logged = memoized<LoggedDecision | undefined>(parseFlowPrefix, 4096);

  constructor(options: FlowAggregatorOptions) {
    this.#options = options;
  }

  /** A packet of the flow-log group at `now`; returns its record, or undefined for a packet that is not a flow log's. */
  packet(packet: LoggedFlowPacket, now: number): FlowRecord | undefined {
    const { prefix, source, destination, protocol, destinationPort } = packet;
    if (source === undefined || destination === undefined || protocol === undefined) return undefined;
    const key = `${prefix}|${source}|${destination}|${protocol}|${destinationPort}`;
    this.#start ??= now;
    const open = this.#open.get(key) ?? this.#openLogged(key, packet, now);
    if (!open) return undefined;
    const { record } = open;
    record.end = now;
    if (open.attempts) {
      // A denied connection's packets are all logged: counted here, its attempts by source port.
      open.attempts.add(packet.sourcePort);
      record.flows = open.attempts.size;
      record.packets++;
      record.bytes += packet.length ?? 0;
    } else record.flows++;
    return record;
  }

  /** The flow tracker's counts of the interval ending `now`: the allowed connections. */
  counted(counts: readonly CountedFlow[], now: number): void {
    this.#start ??= now;
    for (const c of counts) {
      const direction: Direction = c.ingress ? 'ingress' : 'egress';
      const key = `${direction} ${c.decision}|${c.source}|${c.destination}|${c.protocol}|${c.destinationPort}`;
      const open = this.#open.get(key) ?? this.#opened(key, this.#allowedIdentity(c, direction), now, false);
      open.record.end = now;
      open.record.flows += c.flows;
      open.record.packets += c.packets;
      open.record.bytes += c.bytes;
    }
  }

  /** The records of the interval ending `now`. */
  flush(now: number): FlowRecord[] {
    const start = this.#start ?? now;
    const records = [...this.#open.values()].map(({ record }) => ({ ...record, start, end: now }));
    this.#open = new Map();
    this.#start = undefined;
    return records;
  }

  #allowedIdentity(c: CountedFlow, direction: Direction): FlowIdentity {
    const found = c.decision === UNNAMED ? undefined : this.#options.lookup.decision(direction, c.decision);
    const policy: FlowPolicy = found
      ? {
          policy: found.key ?? `unknown/${found.policyHash}`,
          ...(found.tier ? { tier: found.tier } : {}),
          rule: found.rule,
          action: 'Allow',
        }
      : { policy: 'unknown', action: 'Allow' };
    return this.#identity(c.source, c.destination, c.protocol, c.destinationPort, direction, policy);
  }

  /** The record a logged packet with a new key opens (undefined: not a flow log's prefix). */
  #openLogged(key: string, packet: LoggedFlowPacket, now: number): OpenRecord | undefined {
    const decision = this.#logged(packet.prefix);
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
    const identity = this.#identity(source, destination, protocol, destinationPort, decision.direction, policy);
    return this.#opened(key, identity, now, policy.action === 'Deny');
  }

  #identity(
    source: string,
    destination: string,
    protocol: number,
    destinationPort: number | undefined,
    direction: Direction,
    policy: FlowPolicy,
  ): FlowIdentity {
    const { lookup, node } = this.#options;
    return {
      node,
      source: lookup.end(source),
      destination: lookup.end(destination, destinationPort),
      protocol,
      reporter: direction === 'ingress' ? 'dst' : 'src',
      action: policy.action,
      policy,
    };
  }

  #opened(key: string, identity: FlowIdentity, now: number, denied: boolean): OpenRecord {
    const open: OpenRecord = {
      record: { ...identity, start: this.#start ?? now, end: now, flows: 0, packets: 0, bytes: 0 },
      ...(denied ? { attempts: new Set<number | undefined>() } : {}),
    };
    this.#open.set(key, open);
    return open;
  }
}
