// Shared informers over @kubernetes/client-node: one cache and one watch per resource path and
// selectors in a process, however many handlers use it (client-go's SharedInformerFactory).
// client-node's ListWatch lists, then watches from that list's resourceVersion; when a watch ends
// quietly (client-node ends one that hears nothing for 30 s) it watches again from the last
// resourceVersion seen, and after an expired version (410) it lists again. Any other failure (the
// API unreachable, a watch refused) stops it: it is started again here, after a growing delay.
// `synced` says the cache holds a complete list and no failure came since: a controller acts on
// what is absent from a cache only then, and confirms with a fresh GET before it does.
//
// Handlers hear add, update (with the object as it was before), delete, synced (each time the
// cache is complete again) and failed; a handler added after the cache synced is told `synced` at
// once. An update can be ignored when it changes only the object's status (`ignoreStatusOnly`:
// for a reconciler whose own status writes must not trigger it) or nothing `significant` to it
// (a Node's labels and addresses rather than its heartbeats).
//
// Used by the resident programs only: the plugin's own Kubernetes client (k8s/client.ts) loads
// none of client-node.
//
// API: `new Informers(config, { log, metrics?, clock?, retry?, watchTimeoutMs? })`;
// informer(source) → Informer (get, list, synced, whenSynced, addHandler → remove); start(),
// synced(), waitForSync(informers, signal), stop(). What counts as a change: object-changes.ts.
import * as k8s from '@kubernetes/client-node';

import { Backoff, type BackoffOptions } from './backoff.ts';
import { type Clock, systemClock, type Timer } from './clock.ts';
import { describeError } from './errors.ts';
import { changesOnlyStatus, sameContent } from './object-changes.ts';
import type { RuntimeMetrics } from './metrics.ts';

export interface Source<T extends k8s.KubernetesObject> {
  /** For log lines and metrics: "nodes", "the pods of node n1". */
  what: string;
  /** The collection's path: /api/v1/nodes, /apis/crd.projectnet.org/v1/hostendpoints. */
  path: string;
  /** The list, with the same selectors. */
  list: () => Promise<k8s.KubernetesListObject<T>>;
  labelSelector?: string;
  fieldSelector?: string;
  /**
   * What of each object the cache keeps (its handlers and readers see only that), besides
   * managedFields, which no cache keeps. Informers of one collection share a cache: one with
   * another view is another informer.
   */
  view?: { name: string; of: (object: T) => T };
}

export interface Handler<T> {
  add?(object: T): void;
  update?(object: T, old: T | undefined): void;
  delete?(object: T): void;
  /** The cache holds a complete list: first, and again after each failure. */
  synced?(): void;
  failed?(err: Error): void;
}

interface HandlerOptions<T> {
  /** Updates that change only `status` (and bookkeeping: resourceVersion, managedFields) are not passed on. */
  ignoreStatusOnly?: boolean;
  /** Updates are passed on only when this part of the object changed. */
  significant?: (object: T) => unknown;
}

export interface Informer<T> {
  readonly what: string;
  get(name: string, namespace?: string): T | undefined;
  list(): readonly T[];
  synced(): boolean;
  /** Resolves when the cache is complete (at once if it is). */
  whenSynced(): Promise<void>;
  /** Returns what removes the handler. */
  addHandler(handler: Handler<T>, options?: HandlerOptions<T>): () => void;
}

export interface InformersOptions {
  log: { info(message: string): void; warning(message: string): void };
  metrics?: RuntimeMetrics;
  clock?: Clock;
  /** Restarts after a failure (default 0.5 s doubling to 30 s). */
  retry?: BackoffOptions;
  /** How long a watch may hear nothing before it is ended and made again from where it was (client-node: 30 s). */
  watchTimeoutMs?: number;
}

const RETRY: BackoffOptions = { initialMs: 500, maxMs: 30_000, jitter: 0.1 };

/** The watch event types that carry an object (BOOKMARK carries a resourceVersion, ERROR a Status). */
const OBJECT_PHASES = new Set(['ADDED', 'MODIFIED', 'DELETED']);

/**
 * What a cache keeps of an object: `view`'s part, without metadata.managedFields (the server's
 * record of who set which field: the largest part of many objects, which no reader here needs).
 */
function cacheView<T extends k8s.KubernetesObject>(view: ((object: T) => T) | undefined): (object: T) => T {
  return (object) => {
    const kept = view ? view(object) : object;
    if (kept.metadata?.managedFields) {
      const { managedFields: _managed, ...metadata } = kept.metadata;
      kept.metadata = metadata;
    }
    return kept;
  };
}

export class Informers {
  private readonly config: k8s.KubeConfig;
  private readonly options: InformersOptions;
  private readonly informers = new Map<string, SharedInformer<k8s.KubernetesObject>>();
  private started = false;

  constructor(config: k8s.KubeConfig, options: InformersOptions) {
    this.config = config;
    this.options = options;
  }

  /** The process's informer for `source`'s path and selectors, made on first use. */
  informer<T extends k8s.KubernetesObject>(source: Source<T>): Informer<T> {
    const id = `${source.path}?labelSelector=${source.labelSelector ?? ''}&fieldSelector=${source.fieldSelector ?? ''}#${source.view?.name ?? ''}`;
    let found = this.informers.get(id);
    if (!found) {
      found = new SharedInformer(this.config, source as unknown as Source<k8s.KubernetesObject>, this.options);
      this.informers.set(id, found);
      if (this.started) found.start();
    }
    return found as unknown as Informer<T>;
  }

  /** Starts every informer, and those made later as they are made. */
  start(): void {
    this.started = true;
    for (const informer of this.informers.values()) informer.start();
  }

  synced(): boolean {
    return [...this.informers.values()].every((informer) => informer.synced());
  }

  /** Stops every informer's watch; their caches stay as they were. */
  async stop(): Promise<void> {
    this.started = false;
    await Promise.all([...this.informers.values()].map((informer) => informer.stop()));
  }
}

/** Resolves to true once every one of `informers` is synced, false if `signal` aborts first. */
export async function waitForSync(informers: readonly Pick<Informer<unknown>, 'whenSynced'>[], signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  let onAbort: () => void = () => undefined;
  const abort = new Promise<boolean>((resolve) => {
    onAbort = () => resolve(false);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  const all = Promise.all(informers.map((informer) => informer.whenSynced())).then(() => true);
  try {
    return await Promise.race([all, abort]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

interface Registered<T> {
  handler: Handler<T>;
  options: HandlerOptions<T>;
}

class SharedInformer<T extends k8s.KubernetesObject> implements Informer<T> {
  readonly what: string;
  private readonly listWatch: k8s.ListWatch<T>;
  private readonly options: InformersOptions;
  private readonly clock: Clock;
  private readonly backoff: Backoff;
  private readonly handlers = new Set<Registered<T>>();
  /** Each object as last passed on, for the `old` of the next update (the cache already holds the new one). */
  private readonly previous = new Map<string, T>();
  private readonly waiting: (() => void)[] = [];
  private isSynced = false;
  private running = false;
  private failed = false;
  private retry: Timer | undefined;

  constructor(config: k8s.KubeConfig, source: Source<T>, options: InformersOptions) {
    this.what = source.what;
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.backoff = new Backoff(options.retry ?? RETRY);
    const watch = new k8s.Watch(config);
    // client-node keeps the quiet-watch timeout in a private field; tests shorten it to see a
    // watch made again from where it was without waiting 30 s.
    if (options.watchTimeoutMs !== undefined) (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = options.watchTimeoutMs;
    // The cache holds each object as kept (cacheView): client-node's ListWatch has no transform,
    // so its list and its watch's events are given it as kept.
    const keep = cacheView(source.view?.of);
    const watchEvents = watch.watch.bind(watch);
    watch.watch = (path, query, callback, done) =>
      watchEvents(path, query, (phase, object, raw) => callback(phase, OBJECT_PHASES.has(phase) ? keep(object) : object, raw), done);
    const list = async () => {
      const listed = await source.list();
      listed.items = listed.items.map(keep);
      return listed;
    };
    this.listWatch = new k8s.ListWatch(source.path, watch, list, false, source.labelSelector, source.fieldSelector);
    this.listWatch.on('add', (object) => {
      this.previous.set(keyOf(object), object);
      this.dispatch((handler) => handler.add?.(object));
    });
    this.listWatch.on('update', (object) => {
      const old = this.previous.get(keyOf(object));
      this.previous.set(keyOf(object), object);
      this.dispatch(
        (handler) => handler.update?.(object, old),
        (options) => passesOn(options, old, object),
      );
    });
    this.listWatch.on('delete', (object) => {
      this.previous.delete(keyOf(object));
      this.dispatch((handler) => handler.delete?.(object));
    });
    this.listWatch.on('error', (err) => this.fail(err));
  }

  get(name: string, namespace?: string): T | undefined {
    return this.listWatch.get(name, namespace);
  }

  list(): readonly T[] {
    return this.listWatch.list();
  }

  synced(): boolean {
    return this.isSynced;
  }

  whenSynced(): Promise<void> {
    return this.isSynced ? Promise.resolve() : new Promise((resolve) => this.waiting.push(resolve));
  }

  addHandler(handler: Handler<T>, options: HandlerOptions<T> = {}): () => void {
    const registered = { handler, options };
    this.handlers.add(registered);
    if (this.isSynced)
      queueMicrotask(() => {
        if (this.isSynced && this.handlers.has(registered)) this.call(() => handler.synced?.());
      });
    return () => this.handlers.delete(registered);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.begin();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.retry?.cancel();
    this.setSynced(false);
    await this.listWatch.stop();
  }

  private begin(): void {
    this.failed = false;
    this.listWatch.start().then(
      () => {
        if (this.failed || !this.running) return;
        if (!this.isSynced) this.options.log.info(`watching ${this.what}`);
        this.backoff.reset();
        this.setSynced(true);
        this.dispatch((handler) => handler.synced?.());
      },
      (err: unknown) => this.fail(err),
    );
  }

  private fail(err: unknown): void {
    if (!this.running || this.failed) return;
    this.failed = true;
    this.setSynced(false);
    const error = err instanceof Error ? err : new Error(describeError(err));
    this.dispatch((handler) => handler.failed?.(error));
    const delay = this.backoff.next();
    this.options.log.warning(`watching ${this.what} failed (${describeError(err)}); trying again in ${(delay / 1000).toFixed(1)} s`);
    this.retry = this.clock.after(delay, () => {
      if (this.running) this.begin();
    });
  }

  private setSynced(synced: boolean): void {
    this.isSynced = synced;
    this.options.metrics?.informerSynced(this.what, synced);
    if (synced) for (const resolve of this.waiting.splice(0)) resolve();
  }

  private dispatch(call: (handler: Handler<T>) => void, wanted: (options: HandlerOptions<T>) => boolean = () => true): void {
    for (const { handler, options } of this.handlers) if (wanted(options)) this.call(() => call(handler));
  }

  /** A handler's failure is its own: the cache and the other handlers go on. */
  private call(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.options.log.warning(`a handler of ${this.what} failed: ${describeError(err)}`);
    }
  }
}

const keyOf = (object: k8s.KubernetesObject) => `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;

function passesOn<T>(options: HandlerOptions<T>, old: T | undefined, object: T): boolean {
  if (old === undefined) return true;
  if (options.ignoreStatusOnly && changesOnlyStatus(old, object)) return false;
  if (options.significant && sameContent(options.significant(old), options.significant(object))) return false;
  return true;
}
