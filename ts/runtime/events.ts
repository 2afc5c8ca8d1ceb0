// Kubernetes Events for the resident programs, in the shape controller-runtime's recorder (client-go's
// record package) writes them: a reason, a message, Normal or Warning, on an involved object, from
// a source component and host. core/v1 Events, not events.k8s.io/v1: the API server keeps one
// store for both, and core/v1 is what `kubectl get events` lists and `kubectl describe` shows
// (with count and lastTimestamp) and what the ClusterRoles' events rule in the core group ("")
// grants; events.k8s.io would need its own rule and the series fields older clients do not show.
//
// An event repeated (same object, type, reason, message, from the same component and host) is
// aggregated into one object whose count and lastTimestamp grow, not written again: its name is
// `<object>.<hash of all that>`, so a program restarted finds the one it wrote before (read, then
// patched) instead of adding another. Recording never blocks or fails the caller: writes go one at
// a time behind it, at most MAX_PENDING waiting (more are dropped), and a write that fails is
// logged at debug and forgotten; an event is a report, not state anything depends on.
//
// API: `new EventRecorder({ kube, component, host, log, clock? })`; record(object, type, reason,
// message); idle() resolves once everything recorded so far was written or given up.
import { createHash } from 'node:crypto';

import * as k8s from '@kubernetes/client-node';

import { shorten } from '../log/echo.ts';
import { type Clock, systemClock } from './clock.ts';
import { apiStatus, describeError } from './errors.ts';
import type { Log } from './log.ts';

/** The object an event is about, as `kubectl describe` finds its events (by kind, name, namespace and uid). */
export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  name: string;
  /** Absent for a cluster-wide object: its events are in namespace default, as client-go puts them. */
  namespace?: string;
  uid?: string;
}

export type EventType = 'Normal' | 'Warning';

export interface EventRecorderOptions {
  kube: k8s.KubeConfig;
  /** source.component and reportingComponent: `netplug-node`. */
  component: string;
  /** source.host and reportingInstance: the node's name. */
  host: string;
  log: Log;
  clock?: Clock;
}

/** Writes waiting behind the one in flight; beyond this an API server that does not answer costs events, not memory. */
const MAX_PENDING = 100;
/** Events this recorder knows the count of (client-go's cache holds as many). */
const CACHE_SIZE = 4096;
/** What an event's message may hold (events.k8s.io's limit for a note; kubectl shows it whole). */
const MESSAGE_LIMIT = 1024;

export class EventRecorder {
  readonly #options: EventRecorderOptions;
  readonly #core: k8s.CoreV1Api;
  readonly #clock: Clock;
  /** Each event written by name (`<namespace>/<name>`), with its count; the oldest goes first. */
  readonly #counts = new Map<string, number>();
  #queue: Promise<void> = Promise.resolve();
  #pending = 0;

  constructor(options: EventRecorderOptions) {
    this.#options = options;
    this.#core = options.kube.makeApiClient(k8s.CoreV1Api);
    this.#clock = options.clock ?? systemClock;
  }

  /** Records an event on `object`, written behind the caller's back; never throws. */
  record(object: InvolvedObject, type: EventType, reason: string, message: string): void {
    if (this.#pending >= MAX_PENDING) {
      this.#options.log.debug(`event dropped (${MAX_PENDING} waiting): ${reason} on ${object.kind} ${object.name}: ${message}`);
      return;
    }
    this.#pending++;
    const at = new Date(this.#clock.now()).toISOString();
    this.#queue = this.#queue.then(async () => {
      try {
        await this.#write(object, type, reason, shorten(message, MESSAGE_LIMIT - 30), at);
      } catch (err) {
        this.#options.log.debug(`event not written: ${reason} on ${object.kind} ${object.name}: ${describeError(err)}`);
      } finally {
        this.#pending--;
      }
    });
  }

  /** Resolves once every event recorded so far was written or given up. */
  idle(): Promise<void> {
    return this.#queue;
  }

  async #write(object: InvolvedObject, type: EventType, reason: string, message: string, at: string): Promise<void> {
    const { component, host } = this.#options;
    const namespace = object.namespace ?? 'default';
    const name = eventName(object, [component, host, type, reason, message]);
    const key = `${namespace}/${name}`;
    const known = this.#counts.get(key);
    if (known !== undefined) {
      if (await this.#repeat(namespace, name, known, at)) return;
      // Gone (events expire after the API server's event TTL): written anew.
      this.#counts.delete(key);
    }
    try {
      await this.#core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { name, namespace },
          involvedObject: {
            apiVersion: object.apiVersion,
            kind: object.kind,
            name: object.name,
            namespace: object.namespace,
            uid: object.uid,
          },
          type,
          reason,
          message,
          source: { component, host },
          reportingComponent: component,
          reportingInstance: host,
          firstTimestamp: new Date(at),
          lastTimestamp: new Date(at),
          count: 1,
        },
      });
      this.#remember(key, 1);
    } catch (err) {
      if (apiStatus(err) !== 409) throw err;
      // Written before this recorder was made (the program restarted): counted on.
      const existing = await this.#core.readNamespacedEvent({ name, namespace });
      await this.#repeat(namespace, name, existing.count ?? 1, at);
    }
  }

  /** Counts one more of an event written before; false when it is gone. */
  async #repeat(namespace: string, name: string, count: number, at: string): Promise<boolean> {
    try {
      await this.#core.patchNamespacedEvent(
        { name, namespace, body: { count: count + 1, lastTimestamp: at } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
    } catch (err) {
      if (apiStatus(err) === 404) return false;
      throw err;
    }
    this.#remember(`${namespace}/${name}`, count + 1);
    return true;
  }

  #remember(key: string, count: number): void {
    this.#counts.delete(key);
    this.#counts.set(key, count);
    if (this.#counts.size > CACHE_SIZE) this.#counts.delete(this.#counts.keys().next().value as string);
  }
}

/**
 * `<object name>.<16 hex digits>`: the same for the same event of the same object (its uid too, so
 * an object made again under the same name starts a new one), a valid name however long the object's.
 */
function eventName(object: InvolvedObject, what: string[]): string {
  const hash = createHash('sha256')
    .update(JSON.stringify([object.apiVersion, object.kind, object.namespace ?? '', object.name, object.uid ?? '', ...what]))
    .digest('hex')
    .slice(0, 16);
  const base = object.name
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, '-')
    .slice(0, 253 - 17)
    .replace(/[^a-z0-9]+$/, '');
  return `${base || 'object'}.${hash}`;
}
