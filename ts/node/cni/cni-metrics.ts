// The CNI service's metrics, on the program's registry:
//   netplug_cni_request_duration_seconds{command,result}   CNI requests served, by CNI_COMMAND and result
//   netplug_cni_requests_declined_total{reason}           requests declined (the shim ran the one-shot)
//   netplug_ipam_adds_served_together_total               ADDs committed in another ADD's commit
//   netplug_pod_reads_total{from}                         pods of served ADDs, from the watch or the API
//   netplug_watched_pods                                  pods of this node the watch holds
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type CniResult = 'success' | 'error';

/**
 * Upper bounds, in seconds, from 1 ms (an agent ADD on a warm datastore is a few ms) to 10 s (a
 * one-shot on a slow datastore, a DEL waiting out an API timeout).
 */
const CNI_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class CniMetrics {
  readonly #cni: Histogram<'command' | 'result'>;
  readonly #declined: Counter<'reason'>;
  readonly #servedTogether: Counter;
  readonly #podReads: Counter<'from'>;
  #watchedPodCount: () => number = () => 0;

  constructor(registry: Registry) {
    const registers = [registry];
    this.#cni = new Histogram({
      name: 'netplug_cni_request_duration_seconds',
      help: 'Time netplug-node took to serve a CNI request, by CNI_COMMAND and result (error: a non-zero exit).',
      labelNames: ['command', 'result'] as const,
      buckets: CNI_DURATION_BUCKETS,
      registers,
    });
    this.#declined = new Counter({
      name: 'netplug_cni_requests_declined_total',
      help: 'CNI requests netplug-node declined (the shim ran the one-shot plugin instead), by reason: malformed, starting, rolling-back, stopping, journal, netns-not-visible, netns-in-use, pid-namespace, cni-path-not-visible, proxy-differs, delegated-ipam, log-dir-not-visible, kubeconfig-not-visible.',
      labelNames: ['reason'] as const,
      registers,
    });
    this.#servedTogether = new Counter({
      name: 'netplug_ipam_adds_served_together_total',
      help: "ADDs whose addresses netplug-node committed in another ADD's commit, with that ADD's own (a group commit, for ADDs waiting for their node's turn).",
      registers,
    });
    this.#podReads = new Counter({
      name: 'netplug_pod_reads_total',
      help: "Pods of the ADDs netplug-node served (with the pod's uid), by where the pod and its namespace came from: its watch of this node's pods (watch), or GETs from the API server (api: the watch did not hold the pod yet, or was out of step).",
      labelNames: ['from'] as const,
      registers,
    });
    const watched: Gauge = new Gauge({
      name: 'netplug_watched_pods',
      help: "Pods of this node that netplug-node's watch holds (0 while the watch is out of step with the API).",
      registers,
      collect: () => watched.set(this.#watchedPodCount()),
    });
  }

  observeCni(command: string, result: CniResult, seconds: number): void {
    this.#cni.observe({ command, result }, seconds);
  }

  countDeclined(reason: string): void {
    this.#declined.inc({ reason });
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
}
