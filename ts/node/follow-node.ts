// Follows one Kubernetes Node (its labels, its pod CIDRs: what `select` picks): list it, then
// watch it from that resourceVersion. A watch that heard nothing for a while (client-node ends it
// after 30 s) or that the API server closed is watched again from the last resourceVersion seen;
// after an error, or when that version is too old, the Node is read again. Each new value seen is
// handed on in order, one at a time; `select` gets undefined when a read finds no such Node (a
// deletion seen by the watch is not handed on: the Node's next version is).
import * as k8s from '@kubernetes/client-node';

import { describeApiError, isQuietEnd } from '../k8s/watch-objects.ts';
import type { Logger } from '../log/logger.ts';

export interface NodeFollower<T> {
  /** What is followed, for log lines ("labels", "pod CIDRs"). */
  what: string;
  select(node: k8s.V1Node | undefined): T;
  onChange(value: T): Promise<void>;
  /** The Node could not be read (it is read again shortly). */
  onError?(message: string): void;
}

const RETRY_MS = 2_000;

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
  const watch = new k8s.Watch(kube);
  let queue = Promise.resolve();
  let last: string | undefined;
  const hand = (node: k8s.V1Node | undefined) => {
    const value = follower.select(node);
    const text = JSON.stringify(value);
    if (text === last) return;
    last = text;
    queue = queue.then(() =>
      follower.onChange(value).catch((err: unknown) => {
        last = undefined; // so that the next event (or re-read) tries again
        log.warning(`node "${name}": ${follower.what} not written: ${(err as Error).message}`);
      }),
    );
  };
  // Where the next watch starts; undefined: read the Node first.
  let resourceVersion: string | undefined;
  while (!signal.aborted) {
    try {
      if (resourceVersion === undefined) {
        // A list narrowed to the one name (not a get): a Node that does not exist yet is no error, and the watch starts from the list's revision.
        const list = await core.listNode({ fieldSelector: `metadata.name=${name}` });
        hand(list.items[0]);
        resourceVersion = list.metadata?.resourceVersion ?? '';
      }
      let stop = () => {};
      const started = Date.now();
      const ended = await new Promise<unknown>((resolve) => {
        watch
          .watch(
            '/api/v1/nodes',
            { fieldSelector: `metadata.name=${name}`, resourceVersion, allowWatchBookmarks: true },
            (phase, object: k8s.V1Node) => {
              // An ERROR event (the version is too old: 410 Gone) ends the watch; read afresh then.
              if (phase === 'ERROR') resourceVersion = undefined;
              else resourceVersion = object.metadata?.resourceVersion ?? resourceVersion;
              if (phase === 'ADDED' || phase === 'MODIFIED') hand(object);
            },
            resolve,
          )
          .then((controller) => {
            stop = () => controller.abort();
            if (signal.aborted) stop();
            else signal.addEventListener('abort', stop, { once: true });
          }, resolve);
      });
      // The listener goes with its watch, so that rewatching for days adds none.
      signal.removeEventListener('abort', stop);
      if (!ended || isQuietEnd(ended)) {
        // Watched for a while: again at once. One ended as it began waits, or it would spin.
        if (resourceVersion !== undefined && Date.now() - started >= RETRY_MS) continue;
      } else if (!signal.aborted) {
        log.warning(`watching the Kubernetes Node "${name}" ended: ${(ended as Error).message ?? String(ended)}`);
        resourceVersion = undefined;
      }
    } catch (err) {
      resourceVersion = undefined;
      const message = describeApiError(err);
      log.warning(`following the Kubernetes Node "${name}": ${message}`);
      follower.onError?.(message);
    }
    await sleep(RETRY_MS, signal);
  }
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
