// A resident program's Prometheus metrics: one registry per program (never prom-client's global
// one: two programs in one test process keep separate counts), served at /metrics by the health
// server (health-server.ts). The runtime records its own there; a program registers its metrics
// on `registry` (each subsystem of netplug-node registers its own there).
//   netplug_controller_reconcile_total{controller,result}   result: success, error, requeue
//   netplug_controller_reconcile_duration_seconds{controller}
//   netplug_workqueue_depth{controller}                    keys waiting to be reconciled
//   netplug_leader_election_leader{lease}                  1 while this process holds the lease
//   netplug_informer_synced{resource}                      1 while the informer's cache is complete
// and the process's own (CPU, memory, event loop, GC).
//
// API: `new RuntimeMetrics({ registry?, processMetrics? })`; registry, text(), contentType, and the
// recorders the runtime calls (reconciled, queueDepth, leader, informerSynced).
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export type ReconcileResult = 'success' | 'error' | 'requeue';

/** From 1 ms (a pass that finds nothing to do) to a minute (a pass over a large datastore on a slow network). */
const RECONCILE_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export class RuntimeMetrics {
  readonly registry: Registry;
  readonly #reconciles: Counter<'controller' | 'result'>;
  readonly #duration: Histogram<'controller'>;
  readonly #depth: Gauge<'controller'>;
  readonly #leader: Gauge<'lease'>;
  readonly #synced: Gauge<'resource'>;

  constructor(options: { registry?: Registry; processMetrics?: boolean } = {}) {
    this.registry = options.registry ?? new Registry();
    const registers = [this.registry];
    if (!options.registry && options.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
    this.#reconciles = new Counter({
      name: 'netplug_controller_reconcile_total',
      help: 'Reconciles by controller and result (success; error: failed, retried after a backoff; requeue: succeeded and asked for another).',
      labelNames: ['controller', 'result'] as const,
      registers,
    });
    this.#duration = new Histogram({
      name: 'netplug_controller_reconcile_duration_seconds',
      help: 'Time one reconcile took, by controller.',
      labelNames: ['controller'] as const,
      buckets: RECONCILE_BUCKETS,
      registers,
    });
    this.#depth = new Gauge({
      name: 'netplug_workqueue_depth',
      help: "Keys waiting in a controller's work queue.",
      labelNames: ['controller'] as const,
      registers,
    });
    this.#leader = new Gauge({
      name: 'netplug_leader_election_leader',
      help: 'Whether this process holds the Lease (1) and runs the controllers, or stands by (0).',
      labelNames: ['lease'] as const,
      registers,
    });
    this.#synced = new Gauge({
      name: 'netplug_informer_synced',
      help: "Whether an informer's cache holds a complete list (1) or is being listed again (0), by resource and selector.",
      labelNames: ['resource'] as const,
      registers,
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  reconciled(controller: string, result: ReconcileResult, seconds: number): void {
    this.#reconciles.inc({ controller, result });
    this.#duration.observe({ controller }, seconds);
  }

  queueDepth(controller: string, waiting: number): void {
    this.#depth.set({ controller }, waiting);
  }

  leader(lease: string, leading: boolean): void {
    this.#leader.set({ lease }, leading ? 1 : 0);
  }

  informerSynced(resource: string, synced: boolean): void {
    this.#synced.set({ resource }, synced ? 1 : 0);
  }
}
