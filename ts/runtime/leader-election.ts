// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it
// (client-node has none). Every replica campaigns: every `retryPeriodMs` it reads the Lease and
// takes it when it is free, expired, or already its own, by an update conditioned on the Lease's
// resourceVersion (two candidates never both win). A Lease is expired when its holder has not
// renewed it for `leaseDurationMs` as this replica observed it (its own clock measures, not the
// Lease's timestamps: clocks of two machines differ). The leader renews every `retryPeriodMs`;
// a leader that has not renewed for `renewDeadlineMs` (shorter than the lease duration) stops
// leading: its work is aborted before any other replica can take the Lease. Stopping (SIGTERM)
// aborts the work, waits for it, and releases the Lease (holder cleared, duration 1 s), so that a
// rolling update hands over at the next retry rather than after the lease duration.
//
// API: `new LeaderElector(config, settings, { log, clock?, metrics? })`; run(signal, lead) runs
// `lead(leading)` during each term (`leading` aborts when the term ends) until `signal` aborts;
// role() ('leader', 'standby': another holds the Lease, 'unknown': not read yet), holder().
// `leaderElectionSchema(lease)`: a program's settings fields (settings.ts) for it, and
// `leaderElectionSettings(given, namespace?)` what they give.
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

import * as k8s from '@kubernetes/client-node';

import { type Clock, sleep, systemClock } from './clock.ts';
import { apiStatus, describeError } from './errors.ts';
import type { Log } from './log.ts';
import type { RuntimeMetrics } from './metrics.ts';
import { duration, flag, Invalid, SettingsError, setting, text } from './settings.ts';

/** Reads and writes of the Lease a release makes at most while its writes conflict. */
const RELEASE_ATTEMPTS = 3;

export interface LeaderElectionSettings {
  namespace: string;
  name: string;
  /** This replica's identity in the Lease (its pod name and a unique suffix). */
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

export type Role = 'leader' | 'standby' | 'unknown';

interface Observed {
  holder: string;
  /** What changes with every renewal: a changed one restarts the expiry count. */
  record: string;
  durationMs: number;
  at: number;
}

export class LeaderElector {
  private readonly api: k8s.CoordinationV1Api;
  private readonly settings: LeaderElectionSettings;
  private readonly log: Log;
  private readonly clock: Clock;
  private readonly metrics: RuntimeMetrics | undefined;
  private observed: Observed | undefined;
  private currentRole: Role = 'unknown';

  constructor(config: k8s.KubeConfig, settings: LeaderElectionSettings, options: { log: Log; clock?: Clock; metrics?: RuntimeMetrics }) {
    if (settings.renewDeadlineMs >= settings.leaseDurationMs)
      throw new Error('the renew deadline must be shorter than the lease duration: the leader must stop before another can start');
    this.api = config.makeApiClient(k8s.CoordinationV1Api);
    this.settings = settings;
    this.log = options.log;
    this.clock = options.clock ?? systemClock;
    this.metrics = options.metrics;
    this.metrics?.leader(this.lease, false);
  }

  private get lease(): string {
    return `${this.settings.namespace}/${this.settings.name}`;
  }

  role(): Role {
    return this.currentRole;
  }

  /** The holder last read from the Lease. */
  holder(): string | undefined {
    return this.observed?.holder || undefined;
  }

  /** Campaigns and leads, term after term, until `signal` aborts; then releases the Lease if held. */
  async run(signal: AbortSignal, lead: (leading: AbortSignal) => Promise<void>): Promise<void> {
    const { retryPeriodMs } = this.settings;
    while (!signal.aborted) {
      if (!(await this.withDeadline(this.tryAcquireOrRenew(signal), this.settings.renewDeadlineMs, signal))) {
        await sleep(jittered(retryPeriodMs), signal, this.clock);
        continue;
      }
      this.log.info(`leading: holding Lease ${this.lease} as ${this.settings.identity}`);
      this.setRole('leader');
      const term = new AbortController();
      const stopTerm = () => term.abort();
      signal.addEventListener('abort', stopTerm, { once: true });
      const work = lead(term.signal).catch((err: unknown) => this.log.error(`the leader's work failed: ${describeError(err)}`));
      const lost = await this.renewUntilLost(signal, term.signal);
      signal.removeEventListener('abort', stopTerm);
      if (lost) this.log.warning(`lost Lease ${this.lease} (not renewed for ${this.settings.renewDeadlineMs / 1000} s): stopping`);
      term.abort();
      await work;
      this.setRole(lost ? 'unknown' : 'leader');
      if (!lost) await this.withDeadline(this.release(), this.settings.renewDeadlineMs, new AbortController().signal, undefined);
    }
  }

  /** Renews every retry period; true when the renew deadline passed (leadership lost), false when stopped. */
  private async renewUntilLost(signal: AbortSignal, term: AbortSignal): Promise<boolean> {
    const { retryPeriodMs, renewDeadlineMs } = this.settings;
    let renewed = this.clock.now();
    while (!signal.aborted && !term.aborted) {
      await sleep(retryPeriodMs, term, this.clock);
      if (signal.aborted || term.aborted) return false;
      const deadline = renewed + renewDeadlineMs;
      let ok = false;
      while (!ok && this.clock.now() < deadline && !signal.aborted) {
        const started = this.clock.now();
        ok = await this.withDeadline(this.tryAcquireOrRenew(signal), deadline - started, signal);
        if (ok) renewed = started;
        // Another replica holds it: this one's term is over whatever the deadline says.
        else if (this.currentRole === 'standby') return true;
        else await sleep(Math.min(retryPeriodMs, Math.max(0, deadline - this.clock.now())), signal, this.clock);
      }
      if (signal.aborted) return false;
      if (!ok) return true;
    }
    return false;
  }

  /** `attempt`'s answer, or false once `ms` have passed without one (a request hanging on a dead connection) or `signal` aborted. */
  private async withDeadline<T>(attempt: Promise<T>, ms: number, signal: AbortSignal, otherwise: T = false as T): Promise<T> {
    let timer: { cancel(): void } | undefined;
    let onAbort: () => void = () => undefined;
    const late = new Promise<T>((resolve) => {
      timer = this.clock.after(ms, () => resolve(otherwise));
      onAbort = () => resolve(otherwise);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([attempt, late]);
    } finally {
      timer?.cancel();
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** One read and, if the Lease is ours to take or keep, one conditional write; false on any failure. */
  private async tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const { namespace, name, identity, leaseDurationMs } = this.settings;
    const now = () => new k8s.V1MicroTime(Date.now());
    const spec = (transitions: number, acquired: Date | undefined): k8s.V1LeaseSpec => ({
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
      acquireTime: acquired ?? now(),
      renewTime: now(),
      leaseTransitions: transitions,
    });
    try {
      let lease: k8s.V1Lease;
      try {
        lease = await this.api.readNamespacedLease({ namespace, name });
      } catch (err) {
        if (apiStatus(err) !== 404 || signal.aborted) throw err;
        const created = await this.api.createNamespacedLease({
          namespace,
          body: { metadata: { name, namespace }, spec: spec(0, undefined) },
        });
        this.observe(created);
        return true;
      }
      this.observe(lease);
      const holder = lease.spec?.holderIdentity ?? '';
      const observed = this.observed as Observed;
      if (holder !== '' && holder !== identity && this.clock.now() < observed.at + observed.durationMs) {
        this.setRole('standby');
        return false;
      }
      if (signal.aborted) return false;
      const mine = holder === identity;
      const transitions = (lease.spec?.leaseTransitions ?? 0) + (mine ? 0 : 1);
      const body: k8s.V1Lease = { ...lease, spec: spec(transitions, mine ? lease.spec?.acquireTime : undefined) };
      const replaced = await this.api.replaceNamespacedLease({ namespace, name, body });
      this.observe(replaced);
      if (!mine) this.log.info(`took Lease ${this.lease}${holder ? ` from ${holder}, which stopped renewing it` : ''}`);
      return true;
    } catch (err) {
      // 409: another candidate wrote first; it is read again at the next retry.
      if (apiStatus(err) !== 409) this.log.debug(`Lease ${this.lease}: ${describeError(err)}`);
      return false;
    }
  }

  private observe(lease: k8s.V1Lease): void {
    const spec = lease.spec ?? {};
    const record = JSON.stringify([spec.holderIdentity, spec.renewTime, spec.acquireTime, spec.leaseDurationSeconds]);
    if (this.observed?.record === record) return;
    this.observed = {
      holder: spec.holderIdentity ?? '',
      record,
      durationMs: (spec.leaseDurationSeconds ?? 0) * 1000,
      at: this.clock.now(),
    };
    if (this.currentRole === 'unknown' && this.observed.holder !== this.settings.identity && this.observed.holder !== '')
      this.setRole('standby');
  }

  /**
   * Clears the holder, so that a standby replica takes the Lease at its next retry. A renewal the
   * stop cut short may still land after the read (its request was sent): a conflict is read again.
   */
  private async release(): Promise<void> {
    const { namespace, name, identity } = this.settings;
    this.setRole('unknown');
    for (let attempt = 1; ; attempt++) {
      try {
        const lease = await this.api.readNamespacedLease({ namespace, name });
        if (lease.spec?.holderIdentity !== identity) return;
        const now = new k8s.V1MicroTime(Date.now());
        await this.api.replaceNamespacedLease({
          namespace,
          name,
          body: { ...lease, spec: { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1, acquireTime: now, renewTime: now } },
        });
        this.log.info(`released Lease ${this.lease}`);
        return;
      } catch (err) {
        if (apiStatus(err) === 409 && attempt < RELEASE_ATTEMPTS) continue;
        this.log.warning(`could not release Lease ${this.lease} (another replica takes it once it expires): ${describeError(err)}`);
        return;
      }
    }
  }

  private setRole(role: Role): void {
    this.currentRole = role;
    this.metrics?.leader(this.lease, role === 'leader');
  }
}

/** Up to 20 % later, as client-go's retries: candidates that started together do not ask together. */
const jittered = (ms: number) => ms * (1 + 0.2 * Math.random());

/** A Lease or namespace name: a DNS-1123 subdomain. */
function objectName(given: string): string {
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(given))
    throw new Invalid('is not a valid object name (lower-case letters, digits, - and .)');
  return given;
}

/**
 * The settings of a program's leader election, for its schema (settings.ts): LEADER_ELECTION (on
 * by default), the Lease's namespace (LEADER_ELECTION_NAMESPACE, else POD_NAMESPACE, else the pod's
 * own) and name (LEADER_ELECTION_LEASE_NAME, else `lease`), POD_NAME for the identity, and the
 * timings, client-go's defaults.
 */
export const leaderElectionSchema = (lease: string) => ({
  LEADER_ELECTION: flag(true),
  LEADER_ELECTION_NAMESPACE: setting(objectName),
  POD_NAMESPACE: setting(objectName),
  LEADER_ELECTION_LEASE_NAME: setting(objectName, lease),
  POD_NAME: text(),
  LEADER_ELECTION_LEASE_DURATION: duration('15s', { minMs: 1000 }),
  LEADER_ELECTION_RENEW_DEADLINE: duration('10s', { minMs: 500 }),
  LEADER_ELECTION_RETRY_PERIOD: duration('2s', { minMs: 100 }),
});

export interface LeaderElectionGiven {
  LEADER_ELECTION: boolean;
  LEADER_ELECTION_NAMESPACE: string | undefined;
  POD_NAMESPACE: string | undefined;
  LEADER_ELECTION_LEASE_NAME: string;
  POD_NAME: string | undefined;
  LEADER_ELECTION_LEASE_DURATION: number;
  LEADER_ELECTION_RENEW_DEADLINE: number;
  LEADER_ELECTION_RETRY_PERIOD: number;
}

const SERVICE_ACCOUNT_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/**
 * What the parsed settings give: undefined with LEADER_ELECTION=false (every replica works). The
 * namespace is the first of LEADER_ELECTION_NAMESPACE, POD_NAMESPACE, `namespace` (a program's own
 * variable), the pod's service account's, and kube-system (a process outside a pod).
 */
export function leaderElectionSettings(given: LeaderElectionGiven, namespace?: string): LeaderElectionSettings | undefined {
  if (!given.LEADER_ELECTION) return undefined;
  const timing = {
    leaseDurationMs: given.LEADER_ELECTION_LEASE_DURATION,
    renewDeadlineMs: given.LEADER_ELECTION_RENEW_DEADLINE,
    retryPeriodMs: given.LEADER_ELECTION_RETRY_PERIOD,
  };
  if (!(timing.retryPeriodMs < timing.renewDeadlineMs && timing.renewDeadlineMs < timing.leaseDurationMs))
    throw new SettingsError(
      `LEADER_ELECTION_RETRY_PERIOD (${timing.retryPeriodMs / 1000} s), LEADER_ELECTION_RENEW_DEADLINE (${timing.renewDeadlineMs / 1000} s) and LEADER_ELECTION_LEASE_DURATION (${timing.leaseDurationMs / 1000} s) must each be shorter than the next`,
    );
  return {
    namespace: given.LEADER_ELECTION_NAMESPACE ?? given.POD_NAMESPACE ?? namespace ?? ownNamespace(),
    name: given.LEADER_ELECTION_LEASE_NAME,
    identity: `${given.POD_NAME ?? hostname()}_${randomUUID()}`,
    ...timing,
  };
}

/** The pod's namespace from its service account, else kube-system (a process outside a pod). */
function ownNamespace(): string {
  try {
    return readFileSync(SERVICE_ACCOUNT_NAMESPACE, 'utf8').trim() || 'kube-system';
  } catch {
    return 'kube-system';
  }
}
