// netplug-node's Prometheus metrics: CNI request latency by command and result, requests declined
// by reason, datastore request
// and error counts by operation, IPAM usage per pool, ADDs served by a group commit, pods read from
// its watch or the API, programmed routes per kind, and the process's own metrics (CPU, memory,
// event loop, GC). One registry per agent, never prom-client's global one: two agents in one
// process (tests) keep separate counts.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export type CniResult = 'success' | 'error';
export type RouteKind = 'direct' | 'ipip' | 'vxlan' | 'masquerade';

/**
 * Upper bounds, in seconds, from 1 ms (an agent ADD on a warm datastore is a few ms) to 10 s (a
 * one-shot on a slow datastore, a DEL waiting out an API timeout).
 */
export const CNI_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class AgentMetrics {
  readonly registry = new Registry();
  readonly #cni = new Histogram({
    name: 'netplug_cni_request_duration_seconds',
    help: 'Time netplug-node took to serve a CNI request, by CNI_COMMAND and result (error: a non-zero exit).',
    labelNames: ['command', 'result'] as const,
    buckets: CNI_DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #declined = new Counter({
    name: 'netplug_cni_requests_declined_total',
    help: 'CNI requests netplug-node declined (the shim ran the one-shot plugin instead), by reason: malformed, starting, rolling-back, stopping, journal, netns-not-visible, netns-in-use, pid-namespace, cni-path-not-visible, proxy-differs, delegated-ipam, log-dir-not-visible, kubeconfig-not-visible.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly #datastoreRequests = new Counter({
    name: 'netplug_datastore_requests_total',
    help: 'Datastore requests made by netplug-node, by operation (get, list, listKeys, read, commit, commitElseRead).',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });
  readonly #datastoreErrors = new Counter({
    name: 'netplug_datastore_request_errors_total',
    help: 'Datastore requests that failed (unreachable, refused, timed out), by operation; a lost compare-and-swap is not a failure.',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });
  readonly #allocations = new Gauge({
    name: 'netplug_ipam_allocations',
    help: "Addresses allocated in the pool's blocks, cluster-wide, by pool.",
    labelNames: ['pool'] as const,
    registers: [this.registry],
  });
  readonly #free = new Gauge({
    name: 'netplug_ipam_free_addresses',
    help: 'Addresses still free in the pool: in its blocks and in the part of it no block holds yet, by pool.',
    labelNames: ['pool'] as const,
    registers: [this.registry],
  });
  readonly #routes = new Gauge({
    name: 'netplug_routes',
    help: 'Routes and masquerade rules netplug-node has programmed on this node, by kind (direct, ipip, vxlan, masquerade).',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly #servedTogether = new Counter({
    name: 'netplug_ipam_adds_served_together_total',
    help: "ADDs whose addresses netplug-node committed in another ADD's commit, with that ADD's own (a group commit, for ADDs waiting for their node's turn).",
    registers: [this.registry],
  });
  readonly #podReads = new Counter({
    name: 'netplug_pod_reads_total',
    help: "Pods of the ADDs netplug-node served (with the pod's uid), by where the pod and its namespace came from: its watch of this node's pods (watch), or GETs from the API server (api: the watch did not hold the pod yet, or was out of step).",
    labelNames: ['from'] as const,
    registers: [this.registry],
  });
  #watchedPodCount: () => number = () => 0;
  readonly #watchedPods: Gauge = new Gauge({
    name: 'netplug_watched_pods',
    help: "Pods of this node that netplug-node's watch holds (0 while the watch is out of step with the API).",
    registers: [this.registry],
    collect: () => this.#watchedPods.set(this.#watchedPodCount()),
  });
  /** The pools whose usage is set, so that deleted ones can be dropped. */
  readonly #pools = new Set<string>();

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  observeCni(command: string, result: CniResult, seconds: number): void {
    this.#cni.observe({ command, result }, seconds);
  }

  countDeclined(reason: string): void {
    this.#declined.inc({ reason });
  }

  countDatastore(operation: string, failed: boolean): void {
    this.#datastoreRequests.inc({ operation });
    // Created at zero with its first request, so a rate of errors is defined before the first error.
    if (failed) this.#datastoreErrors.inc({ operation });
    else this.#datastoreErrors.inc({ operation }, 0);
  }

  /** A commit that held allocated for `count` waiting ADDs besides its own. */
  countServedTogether(count: number): void {
    this.#servedTogether.inc(count);
  }

  countPodRead(from: 'watch' | 'api'): void {
    this.#podReads.inc({ from });
  }

  /** Asked at each scrape: how many pods the watch holds now. */
  countWatchedPodsWith(count: () => number): void {
    this.#watchedPodCount = count;
  }

  setPoolUsage(pool: string, allocated: number, free: number): void {
    this.#pools.add(pool);
    this.#allocations.set({ pool }, allocated);
    this.#free.set({ pool }, free);
  }

  /** Drops the usage of pools not in `pools` (deleted since they were last observed). */
  keepOnlyPools(pools: readonly string[]): void {
    const kept = new Set(pools);
    for (const pool of this.#pools) {
      if (kept.has(pool)) continue;
      this.#allocations.remove({ pool });
      this.#free.remove({ pool });
      this.#pools.delete(pool);
    }
  }

  setRoutes(kind: RouteKind, count: number): void {
    this.#routes.set({ kind }, count);
  }

  /** The Prometheus text exposition of every metric. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  /** The content type of text(): `text/plain; version=0.0.4; charset=utf-8`. */
  get contentType(): string {
    return this.registry.contentType;
  }
}
