// What runs a resident program's parts together, in controller-runtime's Manager shape:
// - the health and metrics server (/livez, /readyz, /metrics) and the health checks' polls;
// - the shared informers, on every replica, so that a standby's caches are warm when it takes over;
// - the controllers, each once the informers it reads are synced; with leader election only while
//   this replica holds the Lease (a term ends: they stop, and run again at the next term);
// - on `signal` (SIGTERM): the controllers stop (running reconciles get `stopTimeoutMs` to end),
//   the Lease is released, the informers and the server stop.
// Readiness, per controller: a leader is ready once the controller has completed a reconcile; a
// standby (another replica holds the Lease) is ready (a rolling update must be able to replace
// the leader); a replica that has not read the Lease yet is not.
// A reconcile still running `stopTimeoutMs` after its term was lost could overlap with the next
// leader's: the program then stops and exits 1, and its pod is restarted.
//
// API: `new Manager({ log, clock?, health? (with aliases?), metricsAddress?, metrics?, leaderElection?,
// stopTimeoutMs? })`; health (HealthChecks), metrics (RuntimeMetrics), informers(config), add(controller,
// { waitFor }), role(), run(signal) → exit code (0 stopped, 1 could not serve or a stuck reconcile).
import type * as k8s from '@kubernetes/client-node';

import { aborted, type Clock, sleep, systemClock } from './clock.ts';
import type { Controller } from './controller.ts';
import { describeError } from './errors.ts';
import { HealthChecks } from './health.ts';
import { type HealthServer, type Served, serveHealth } from './health-server.ts';
import { type Informer, Informers, type InformersOptions, waitForSync } from './informers.ts';
import { LeaderElector, type LeaderElectionSettings, type Role } from './leader-election.ts';
import type { Log } from './log.ts';
import { RuntimeMetrics } from './metrics.ts';

export interface ManagerOptions {
  log: Log;
  clock?: Clock;
  /** Where /livez, /readyz and /metrics are served (none: no server), and older paths answered as a probe (health-server.ts). */
  health?: { host: string; port: number; aliases?: Served['aliases'] };
  /** A second listener serving /metrics alone. */
  metricsAddress?: { host: string; port: number };
  metrics?: RuntimeMetrics;
  /** Controllers run only while this replica holds the Lease. */
  leaderElection?: { config: k8s.KubeConfig; settings: LeaderElectionSettings };
  /** How long stopping waits for running reconciles (default 5 s). */
  stopTimeoutMs?: number;
  /** Options of the informers (informers.ts): their restart backoff, the quiet-watch timeout. */
  informers?: Omit<InformersOptions, 'log' | 'metrics' | 'clock'>;
}

interface Managed {
  controller: Controller;
  waitFor: readonly Pick<Informer<unknown>, 'whenSynced'>[];
}

export class Manager {
  readonly health: HealthChecks;
  readonly metrics: RuntimeMetrics;
  private readonly options: ManagerOptions;
  private readonly clock: Clock;
  private readonly controllers: Managed[] = [];
  private readonly elector: LeaderElector | undefined;
  private shared: Informers | undefined;

  constructor(options: ManagerOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.health = new HealthChecks({ log: options.log, clock: this.clock });
    this.metrics = options.metrics ?? new RuntimeMetrics();
    const election = options.leaderElection;
    this.elector =
      election && new LeaderElector(election.config, election.settings, { log: options.log, clock: this.clock, metrics: this.metrics });
  }

  /** The process's shared informers (one set per manager). */
  informers(config: k8s.KubeConfig): Informers {
    this.shared ??= new Informers(config, { ...this.options.informers, log: this.options.log, metrics: this.metrics, clock: this.clock });
    return this.shared;
  }

  /** Runs `controller` (while leading) once every informer of `waitFor` is synced. */
  add(controller: Controller, options: { waitFor?: readonly Pick<Informer<unknown>, 'whenSynced'>[] } = {}): void {
    this.controllers.push({ controller, waitFor: options.waitFor ?? [] });
    this.health.add(`controller-${controller.name}`, () => {
      if (this.role() === 'standby') return undefined;
      return controller.running() && controller.succeeded()
        ? undefined
        : `the ${controller.name} controller has not completed its first pass`;
    });
  }

  /** With leader election: whether this replica leads, stands by, or has not read the Lease yet; else leader. */
  role(): Role {
    return this.elector?.role() ?? 'leader';
  }

  /** Runs until `signal` aborts; resolves to the exit code. */
  async run(signal: AbortSignal): Promise<number> {
    const { log } = this.options;
    const stop = new AbortController();
    const stopNow = () => stop.abort();
    if (signal.aborted) stop.abort();
    else signal.addEventListener('abort', stopNow, { once: true });
    const servers: HealthServer[] = [];
    let code = 0;
    try {
      for (const [address, serves] of [
        ...(this.options.health ? [[this.options.health, 'all'] as const] : []),
        ...(this.options.metricsAddress ? [[this.options.metricsAddress, 'metrics'] as const] : []),
      ]) {
        const aliases = serves === 'all' ? this.options.health?.aliases : undefined;
        servers.push(await serveHealth(address, { checks: this.health, metrics: this.metrics, serves, ...(aliases ? { aliases } : {}) }));
        log.info(`serving ${serves === 'all' ? '/livez, /readyz and /metrics' : '/metrics'} on ${address.host}:${address.port}`);
      }
    } catch (err) {
      log.error(`cannot serve health and metrics: ${describeError(err)}`);
      code = 1;
      stop.abort();
    }
    this.health.start(stop.signal);
    this.shared?.start();

    const lead = async (leading: AbortSignal): Promise<void> => {
      const runs = this.controllers.map(async ({ controller, waitFor }) => {
        if (await waitForSync(waitFor, leading)) await controller.run(leading);
      });
      const all = Promise.all(runs);
      await aborted(leading);
      const waited = new AbortController();
      const ended = await Promise.race([
        all.then(() => true),
        sleep(this.options.stopTimeoutMs ?? 5000, waited.signal, this.clock).then(() => false),
      ]);
      waited.abort();
      if (!ended && !stop.signal.aborted) {
        log.error(`a reconcile did not end within ${(this.options.stopTimeoutMs ?? 5000) / 1000} s of the lost Lease: exiting`);
        code = 1;
        stop.abort();
      }
    };
    if (!stop.signal.aborted) {
      if (this.elector) await this.elector.run(stop.signal, lead);
      else await lead(stop.signal);
    }

    signal.removeEventListener('abort', stopNow);
    log.info('stopping');
    await this.shared?.stop();
    await this.health.stopped();
    await Promise.all(servers.map((server) => server.close()));
    return code;
  }
}
