// A program's named health checks, as /livez and /readyz report them (health-server.ts). A probe
// only reads results already known: no check makes a datastore or API round trip per probe. A
// check's result is
// - set by the program when it learns it (`set`: start-up work done, routes programmed);
// - computed from in-memory state at each probe (`add`: a cache synced, a first reconcile done;
//   such a function must not do I/O);
// - or refreshed every `intervalMs` by a probe of its own, each at most `timeoutMs` (`poll`: the
//   datastore answers, the API server answers).
// A result is undefined for healthy, else the problem (a line; health-server.ts shows it only to
// loopback callers). Each change of a check's result is logged (a warning when it fails, info when
// it is healthy again).
//
// API: `new HealthChecks({ log, clock? })`; set(name, problem, kind?), add(name, check, kind?),
// poll(name, probe, { intervalMs, timeoutMs, kind? }), start(signal) (begins the polls),
// results(kind), healthy(kind). `kind` is 'ready' (the default) or 'live'.
import { type Clock, sleep, systemClock } from './clock.ts';
import { describeError } from './errors.ts';
import type { Log } from './log.ts';

export type CheckKind = 'live' | 'ready';

export interface CheckResult {
  name: string;
  /** Undefined when healthy. */
  problem: string | undefined;
}

interface Check {
  kind: CheckKind;
  read(): string | undefined;
}

interface Poll {
  name: string;
  probe: () => Promise<unknown>;
  intervalMs: number;
  timeoutMs: number;
}

export class HealthChecks {
  private readonly checks = new Map<string, Check>();
  private readonly stored = new Map<string, string | undefined>();
  private readonly polls: Poll[] = [];
  private readonly reported = new Map<string, string | undefined>();
  private readonly log: Log;
  private readonly clock: Clock;
  private signal: AbortSignal | undefined;
  private running: Promise<void>[] = [];

  constructor(options: { log: Log; clock?: Clock }) {
    this.log = options.log;
    this.clock = options.clock ?? systemClock;
  }

  /** A check whose result the program sets (`problem` undefined: healthy); changes after the first are logged. */
  set(name: string, problem: string | undefined, kind: CheckKind = 'ready'): void {
    this.record(name, problem, kind, false);
  }

  /** A check computed at each probe from the program's own state; it must not do I/O. */
  add(name: string, check: () => string | undefined, kind: CheckKind = 'ready'): void {
    this.checks.set(name, { kind, read: check });
  }

  /**
   * A check refreshed by `probe` (its rejection, or no answer within `timeoutMs`, is the problem,
   * as `describe` words it) every `intervalMs`; unhealthy until its first probe answered.
   */
  poll(
    name: string,
    probe: () => Promise<unknown>,
    options: { intervalMs: number; timeoutMs: number; kind?: CheckKind; describe?: (err: unknown) => string; pending?: string },
  ): void {
    const describe = options.describe ?? describeError;
    this.checks.set(name, { kind: options.kind ?? 'ready', read: () => this.stored.get(name) });
    // Not reported: the first result is (a failure) or is not (healthy) worth a line.
    this.stored.set(name, options.pending ?? `${name} has not been checked yet`);
    const run = async () => {
      let timer: { cancel(): void } | undefined;
      const late = new Promise<string>((resolve) => {
        timer = this.clock.after(options.timeoutMs, () => resolve(`no answer within ${options.timeoutMs / 1000} s`));
      });
      // A probe that throws at once fails like one that rejects.
      const outcome = Promise.resolve()
        .then(probe)
        .then(
          () => undefined,
          (err: unknown) => describe(err),
        );
      const problem = await Promise.race([outcome, late.then((text) => describe(new Error(text)))]);
      timer?.cancel();
      this.record(name, problem, options.kind ?? 'ready', true);
    };
    this.polls.push({ name, probe: run, intervalMs: options.intervalMs, timeoutMs: options.timeoutMs });
    if (this.signal) this.startPoll(this.polls[this.polls.length - 1] as Poll, this.signal);
  }

  /** Starts the polls (those added later start at once); they stop when `signal` aborts. */
  start(signal: AbortSignal): void {
    this.signal = signal;
    for (const poll of this.polls) this.startPoll(poll, signal);
  }

  /** Resolves once the polls have stopped. */
  async stopped(): Promise<void> {
    await Promise.all(this.running);
  }

  results(kind: CheckKind): CheckResult[] {
    return [...this.checks]
      .filter(([, check]) => check.kind === kind)
      .map(([name, check]) => ({ name, problem: check.read() || undefined }));
  }

  healthy(kind: CheckKind): boolean {
    return this.results(kind).every((result) => result.problem === undefined);
  }

  private startPoll(poll: Poll, signal: AbortSignal): void {
    this.running.push(
      (async () => {
        while (!signal.aborted) {
          await poll.probe();
          await sleep(poll.intervalMs, signal, this.clock);
        }
      })(),
    );
  }

  /** Stores a result; logs a change, and a first result that is a failure when `announceFirst`. */
  private record(name: string, problem: string | undefined, kind: CheckKind, announceFirst: boolean): void {
    if (!this.checks.has(name)) this.checks.set(name, { kind, read: () => this.stored.get(name) });
    this.stored.set(name, problem);
    const known = this.reported.has(name);
    const before = this.reported.get(name);
    this.reported.set(name, problem);
    if (!known && !announceFirst) return;
    if (known && before === problem) return;
    if (problem !== undefined) this.log.warning(`${kind === 'ready' ? 'not ready' : 'not live'}: ${problem}`);
    else if (known) this.log.info(`${name}: healthy again`);
  }
}
