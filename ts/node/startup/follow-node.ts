// Follows one Kubernetes Node (its labels, its pod CIDRs: what `select` picks) with an informer
// (runtime/informers.ts, narrowed to the one name): listed, then watched from that version,
// watched again where it left off when the watch ends quietly, listed again after a failure.
// Each new value seen is handed on in order, one at a time; `select` gets undefined when a list
// finds no such Node (a deletion seen by the watch is not handed on: the Node's next version is).
import * as k8s from '@kubernetes/client-node';

import type { Logger } from '../log/logger.ts';
import { aborted } from '../runtime/clock.ts';
import { describeError } from '../runtime/errors.ts';
import { Informers } from '../runtime/informers.ts';

export interface NodeFollower<T> {
  /** What is followed, for log lines ("labels", "pod CIDRs"). */
  what: string;
  select(node: k8s.V1Node | undefined): T;
  onChange(value: T): Promise<void>;
  /** The Node could not be read (it is read again shortly). */
  onError?(message: string): void;
}

/** Follows a Node's labels (the etcd datastore's Node registration). */
export const labelsOf = (node: k8s.V1Node | undefined): Record<string, string> => node?.metadata?.labels ?? {};

/** Runs until `signal` aborts. `onChange` failures are logged; the next change tries again. */
export async function followNode<T>(
  kube: k8s.KubeConfig,
  name: string,
  follower: NodeFollower<T>,
  signal: AbortSignal,
  log: Logger,
): Promise<void> {
  const core = kube.makeApiClient(k8s.CoreV1Api);
  let queue = Promise.resolve();
  let last: string | undefined;
  const hand = (node: k8s.V1Node | undefined) => {
    const value = follower.select(node);
    const text = JSON.stringify(value);
    if (text === last) return;
    last = text;
    queue = queue.then(() =>
      follower.onChange(value).catch((err: unknown) => {
        last = undefined; // so that the next event (or list) tries again
        log.warning(`node "${name}": ${follower.what} not written: ${(err as Error).message}`);
      }),
    );
  };
  const fieldSelector = `metadata.name=${name}`;
  // A list narrowed to the one name (not a get): a Node that does not exist yet is no error.
  const informers = new Informers(kube, { log: { info: () => undefined, warning: (message) => log.warning(message) } });
  const watched = informers.informer<k8s.V1Node>({
    what: `the Kubernetes Node "${name}"`,
    path: '/api/v1/nodes',
    list: () => core.listNode({ fieldSelector }),
    fieldSelector,
  });
  watched.addHandler({
    // Called once the list is in, and again after each failure.
    synced: () => hand(watched.get(name)),
    add: hand,
    update: (object) => hand(object),
    failed: (err) => follower.onError?.(describeError(err)),
  });
  informers.start();
  await aborted(signal);
  await informers.stop();
  await queue;
}

export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}
