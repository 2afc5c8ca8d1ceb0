// One policy pass, the controller's and the CNI hook's alike (one at a time): the followed changes
// go to the compiler. When only set and map elements changed (a pod elsewhere come, gone or
// relabelled) and the kernel holds the part before them, those elements are written alone, in one
// batch, the composer recording the new part; when chains changed the part goes to the composer,
// which sends the writer what changed (for a pod come or gone, its dispatch entries, chains and
// set elements) in one transaction. Every refresh interval the writer checks that the kernel's
// table is as it wrote it, and writes it whole when it is not (repair). Either goes without the
// composer's coalescing wait. Then the status files of the local pods the kernel now dispatches
// are written, and those of pods gone removed.
//
// Fail closed: the part's dispatch drops any workload-prefixed interface it does not map, and a
// status file is written only after the write holding that pod's chains committed, so the first
// file never comes before the table. Stopping the agent leaves the table as it is.
import { performance } from 'node:perf_hooks';

import type { NftComposer } from '../../dataplane/nft-composer.ts';
import type { Logger } from '../../log/logger.ts';
import { POLICY_PART } from '../../policy/names.ts';
import { span } from '../../runtime/call-spans.ts';
import type { EngineFeed } from './feed-engine.ts';
import type { PolicyMetrics } from './policy-metrics.ts';
import { statusFileOf, type StatusFile, type StatusFiles } from './write-status-files.ts';

/** How long a pod's first sighting is kept waiting for its status file before it is forgotten. */
const SEEN_KEPT_MS = 600_000;

export type PassOutcome = 'written' | 'unchanged' | 'waiting';

export interface PolicyProgrammerOptions {
  feed: EngineFeed;
  /** Without `updatePart`, element changes are given as whole parts too. */
  table: Pick<NftComposer, 'setPart'> & Partial<Pick<NftComposer, 'updatePart'>>;
  /** Undefined: no status files. */
  files: StatusFiles | undefined;
  metrics: PolicyMetrics;
  log: Logger;
  /** The part is given again at least this often, so that the writer puts back what was changed by hand. */
  repairMs: number;
  /** Told each problem once, as it first appears (report-issues.ts makes it an Event). */
  onNewIssue?: (issue: NewIssue) => void;
}

/** What of a resource cannot be programmed: `<Kind>/<namespace>/<name>`, the field if known apart, why. */
export interface NewIssue {
  resource: string;
  field?: string;
  message: string;
}

export class PolicyProgrammer {
  readonly #options: PolicyProgrammerOptions;
  #queue: Promise<unknown> = Promise.resolve();
  /** The kernel holds the part last given (a write of it committed). */
  #inKernel = false;
  #everInKernel = false;
  /** When the whole part was last given. */
  #lastWrite = 0;
  /** Local pods' first sighting (performance.now()), until their status file is written. */
  readonly #seen = new Map<string, number>();
  /** Local pods with a status file now. */
  #filed = new Set<string>();
  #issuesSeen = new Set<string>();
  /** How long the last pass took (s), and its steps (feed and compile, whole part, kernel write, status files). */
  lastPass: { seconds: number; steps: Record<string, number> } = { seconds: 0, steps: {} };

  constructor(options: PolicyProgrammerOptions) {
    this.#options = options;
  }

  /** Runs `work` after every pass and hook before it (they share the engine and the table). */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    const result = this.#queue.then(work, work);
    this.#queue = result.catch(() => undefined);
    return result;
  }

  /** Whether a pass has put the part in the kernel (readiness; the CNI hook programs pods from then on). */
  inKernel(): boolean {
    return this.#everInKernel;
  }

  /** A local pod seen (by the watch or its ADD): the time to its status file is measured from the first sighting. */
  sawPod(key: string): void {
    if (!this.#seen.has(key) && !this.#filed.has(key)) this.#seen.set(key, performance.now());
  }

  /** Feeds the engine, writes what changed, then the status files (call through `exclusive`). */
  async pass(): Promise<PassOutcome> {
    const { feed, table, metrics, repairMs } = this.#options;
    const started = performance.now();
    const steps: Record<string, number> = {};
    // A step's time is both the served call's span (if any) and the pass's own record.
    const step = async <T>(name: string, work: () => T | Promise<T>): Promise<T> => {
      const at = performance.now();
      try {
        return await span(`policy: ${name}`, work);
      } finally {
        steps[name] = (performance.now() - at) / 1000;
      }
    };
    const update = await step('feed and compile', () => {
      feed.pass();
      return feed.engine.flush();
    });
    const changed = update.structural || (update.elements.sets?.length ?? 0) > 0 || (update.elements.maps?.length ?? 0) > 0;
    this.#noteIssues();
    let outcome: PassOutcome = 'unchanged';
    if (changed || !this.#inKernel || started - this.#lastWrite > repairMs) {
      const repair = started - this.#lastWrite > repairMs;
      const elementsOnly = changed && !update.structural && this.#inKernel && !repair;
      this.#inKernel = false;
      const part = await step('whole part', () => feed.engine.part());
      // The controller's settle coalesced the changes already, and an ADD waits for this write.
      const now = { now: true };
      const given = await step('kernel write', () =>
        elementsOnly && table.updatePart
          ? table.updatePart(POLICY_PART, part, update.elements, now)
          : table.setPart(POLICY_PART, part, { now: true, verify: repair }),
      );
      if (given === 'waiting') return 'waiting';
      this.#inKernel = true;
      this.#everInKernel = true;
      // Element batches and differences repair nothing: the repair clock runs from the last whole write.
      if (repair) this.#lastWrite = started;
      outcome = 'written';
    }
    await step('status files', () => this.#writeStatusFiles());
    const stats = feed.engine.stats();
    metrics.policies.set(stats.activePolicies);
    metrics.rules.set(stats.policyRules);
    metrics.endpoints.set(stats.localEndpoints);
    this.lastPass = { seconds: (performance.now() - started) / 1000, steps };
    metrics.flush.observe(this.lastPass.seconds);
    return outcome;
  }

  #writeStatusFiles(): void {
    const { feed, files, log } = this.#options;
    const wanted: StatusFile[] = [];
    const keyOf = new Map<string, string>();
    for (const pod of feed.localPods().values()) {
      const hostInterface = feed.engine.programmedInterface(pod.key);
      // Without an address its chains drop all it sends: not ready for its containers yet.
      if (hostInterface === undefined || pod.addresses.length === 0) continue;
      const file = statusFileOf(pod, hostInterface);
      wanted.push(file);
      keyOf.set(file.name, pod.key);
    }
    this.#filed = new Set(keyOf.values());
    const now = performance.now();
    for (const [key, at] of this.#seen) if (now - at > SEEN_KEPT_MS) this.#seen.delete(key);
    if (!files) {
      for (const key of this.#filed) this.#observe(key, now);
      return;
    }
    const synced = files.sync(wanted);
    for (const name of synced.written) {
      const key = keyOf.get(name);
      if (key) this.#observe(key, now);
    }
    if (synced.written.length + synced.removed.length > 0)
      log.debug('endpoint status files', { written: synced.written, removed: synced.removed });
  }

  #observe(key: string, now: number): void {
    const at = this.#seen.get(key);
    if (at === undefined) return;
    this.#seen.delete(key);
    this.#options.metrics.podProgrammed.observe((now - at) / 1000);
  }

  /** Logs each problem once when it first appears, counts it, and sets the gauge to the problems there are now. */
  #noteIssues(): void {
    const { feed, metrics, log, onNewIssue } = this.#options;
    const now = new Map<string, NewIssue>();
    for (const { policy, field, message } of feed.engine.issues())
      now.set(`${policy}: ${field}: ${message}`, { resource: policy, field, message });
    for (const [resource, messages] of feed.resourceIssues())
      for (const message of messages) now.set(`${resource}: ${message}`, { resource, message });
    for (const [text, issue] of now) {
      if (this.#issuesSeen.has(text)) continue;
      log.warning(`not programmed: ${text}`);
      metrics.issuesSeen.inc();
      onNewIssue?.(issue);
    }
    this.#issuesSeen = new Set(now.keys());
    metrics.issues.set(now.size);
  }
}
