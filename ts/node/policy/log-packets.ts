// The Log action's packets in netplug-node's log. A Log rule sends what it matches to NFLOG group
// `group` with the prefix `netplug <policy> <direction> rule <n>`, at most the engine's
// `logPerSecond` a second per rule (the kernel's `limit`); while policy is enforced the subsystem
// reads that group and writes one info line per packet. Many Log rules together could still flood
// the log, so the lines are limited again here (one token bucket for all of them) and a line says
// how many were left out. The addon reads on a thread of its own and hands packets over without
// waiting; nothing here waits on the packets' path. A group another listener holds gets a warning
// and retries: policy is enforced all the same.
import type { NflogPacket } from '../../dataplane/nftables.ts';
import type { Logger } from '../../log/logger.ts';
import { systemClock, type Clock, type Timer } from '../../runtime/clock.ts';
import { followNflog, type Subscribe } from './follow-nflog.ts';

/** The NFLOG group of Log rules (the engine's default) and the lines a second written at most. */
export const LOG_GROUP = 20;
const LINES_PER_SECOND = 20;
/** How long after the first line left out the count of those left out is written. */
const SUPPRESSED_REPORT_MS = 1_000;

export interface PacketLogOptions {
  log: Logger;
  group?: number;
  linesPerSecond?: number;
  clock?: Clock;
  subscribe?: Subscribe;
}

export interface PacketLog {
  /** Ends the subscription (and the retries); the count of lines left out is written first. */
  stop(): Promise<void>;
}

/** Subscribes to the Log rules' group and writes their packets to `log` until stopped. */
export function logPolicyPackets(options: PacketLogOptions): PacketLog {
  const { log, group = LOG_GROUP, clock = systemClock, subscribe } = options;
  const bucket = new TokenBucket(options.linesPerSecond ?? LINES_PER_SECOND, clock);
  let suppressed = 0;
  let report: Timer | undefined;
  const reportSuppressed = () => {
    report = undefined;
    if (suppressed === 0) return;
    log.info(`${suppressed} more packets of Log rules not written (at most ${bucket.rate} lines a second)`);
    suppressed = 0;
  };
  const onPacket = (packet: NflogPacket) => {
    if (bucket.take()) return log.info(describePacket(packet));
    suppressed++;
    report ??= clock.after(SUPPRESSED_REPORT_MS, reportSuppressed);
  };

  const following = followNflog({
    group,
    onPacket,
    log,
    what: 'the packets of Log rules',
    started: `writing the packets of Log rules to this log (NFLOG group ${group})`,
    clock,
    subscribe,
  });

  return {
    async stop() {
      await following.stop();
      report?.cancel();
      reportSuppressed();
    },
  };
}

/** Allows `rate` takes a second, up to `rate` at once after a quiet spell. */
class TokenBucket {
  readonly rate: number;
  readonly #clock: Clock;
  #tokens: number;
  #at: number;

  constructor(rate: number, clock: Clock) {
    this.rate = rate;
    this.#clock = clock;
    this.#tokens = rate;
    this.#at = clock.now();
  }

  take(): boolean {
    const now = this.#clock.now();
    this.#tokens = Math.min(this.rate, this.#tokens + ((now - this.#at) * this.rate) / 1000);
    this.#at = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}

const PROTOCOLS: Record<number, string> = { 1: 'icmp', 6: 'tcp', 17: 'udp', 58: 'icmpv6', 132: 'sctp' };

/**
 * `Log rule shop/web ingress rule 0: tcp 10.0.0.1:40000 -> 10.0.0.2:80 in=cali1 out=cali2`: the
 * policy and rule (the rule's log prefix without `netplug `), then what the packet's headers gave.
 */
export function describePacket(packet: NflogPacket): string {
  const rule = packet.prefix.startsWith('netplug ') ? packet.prefix.slice('netplug '.length) : packet.prefix;
  const protocol = packet.protocol === undefined ? `IPv${packet.family}` : (PROTOCOLS[packet.protocol] ?? `protocol ${packet.protocol}`);
  const end = (address: string | undefined, port: number | undefined) => {
    const shown = address === undefined ? '?' : address.includes(':') && port !== undefined ? `[${address}]` : address;
    return port === undefined ? shown : `${shown}:${port}`;
  };
  const icmp =
    packet.icmpType === undefined ? '' : ` type ${packet.icmpType}${packet.icmpCode === undefined ? '' : ` code ${packet.icmpCode}`}`;
  const interfaces = [
    ...(packet.inInterface ? [`in=${packet.inInterface}`] : []),
    ...(packet.outInterface ? [`out=${packet.outInterface}`] : []),
  ];
  return [
    `Log rule ${rule}: ${protocol} ${end(packet.source, packet.sourcePort)} -> ${end(packet.destination, packet.destinationPort)}${icmp}`,
    ...interfaces,
  ].join(' ');
}
