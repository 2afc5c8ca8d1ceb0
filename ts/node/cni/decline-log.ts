// Declines, for operators: each kind of reason (paths and numbers aside) logged the first time it
// occurs, then only counted, and the counts given when the agent stops; every request's reason at
// debug; each counted by kind on /metrics. A decline that means a setting is wrong (decline.ts'
// MISCONFIGURED) and repeats makes the agent not ready, naming it, until none has occurred for a
// while: every call it declines costs a one-shot, and a log line alone goes unseen.
import type { Logger } from '../../log/logger.ts';
import { MISCONFIGURED, type Decline, type DeclineKind } from './decline.ts';

/** A misconfiguration shows on readiness once it has declined this many calls... */
const REPEATS = 2;
/** ...the last within this long. */
const RECENT_MS = 5 * 60_000;

export class DeclineLog {
  private readonly byKind = new Map<string, number>();
  private readonly log: Logger;
  private readonly count: (kind: DeclineKind) => void;
  private readonly now: () => number;
  /** The latest misconfiguration, and how often it has declined since it first did. */
  private misconfigured: { reason: string; times: number; at: number } | undefined;

  constructor(log: Logger, count: (kind: DeclineKind) => void = () => undefined, now: () => number = Date.now) {
    this.log = log;
    this.count = count;
    this.now = now;
  }

  note({ kind, reason }: Decline): void {
    this.count(kind);
    if (MISCONFIGURED.has(kind)) {
      const times = this.misconfigured && this.now() - this.misconfigured.at <= RECENT_MS ? this.misconfigured.times + 1 : 1;
      this.misconfigured = { reason, times, at: this.now() };
    }
    const pattern = reason.replace(/"[^"]*"|\/\S*|\d{2,}/g, '…');
    const seen = this.byKind.get(pattern);
    // Bounded: kinds are few unless something varies that the pattern does not strip.
    if (seen === undefined && this.byKind.size >= 50) {
      this.log.debug(`declined a CNI request: ${reason}`);
      return;
    }
    this.byKind.set(pattern, (seen ?? 0) + 1);
    if (seen === undefined)
      this.log.info(`declined a CNI request, the shim runs the one-shot: ${reason} (the next ones like it are counted)`);
    else this.log.debug(`declined a CNI request: ${reason}`);
  }

  /** Why the agent is not ready: a misconfiguration that keeps declining calls; undefined otherwise. */
  notReady(): string | undefined {
    const latest = this.misconfigured;
    if (!latest || latest.times < REPEATS || this.now() - latest.at > RECENT_MS) return undefined;
    return `CNI calls declined (${latest.times} so far), the shim runs the one-shot plugin for each: ${latest.reason}`;
  }

  summary(): string {
    if (this.byKind.size === 0) return '';
    return ` (${[...this.byKind].map(([kind, n]) => `${n}× ${kind}`).join('; ')})`;
  }
}
