// Follows one Kubernetes Node's labels: list it, then watch it from that resourceVersion; when
// the watch ends (the API server closes watches after a while, or the connection dropped), read
// again and watch again. Each label set seen is handed on in order, one at a time.
import * as k8s from '@kubernetes/client-node';

import type { Logger } from '../log/logger.ts';

export type OnLabels = (labels: Record<string, string>) => Promise<void>;

const RETRY_MS = 2_000;

/** Runs until `signal` aborts. `onLabels` failures are logged; the next change tries again. */
export async function followNode(kube: k8s.KubeConfig, name: string, onLabels: OnLabels, signal: AbortSignal, log: Logger): Promise<void> {
  const core = kube.makeApiClient(k8s.CoreV1Api);
  const watch = new k8s.Watch(kube);
  let queue = Promise.resolve();
  let last = '';
  const hand = (labels: Record<string, string>) => {
    const text = JSON.stringify(labels);
    if (text === last) return;
    last = text;
    queue = queue.then(() =>
      onLabels(labels).catch((err: unknown) => {
        last = ''; // so that the next event (or re-read) tries again
        log.warning(`node "${name}": labels not written: ${(err as Error).message}`);
      }),
    );
  };
  while (!signal.aborted) {
    try {
      // A list narrowed to the one name (not a get): a Node that does not exist yet is no error, and the watch starts from the list's revision.
      const list = await core.listNode({ fieldSelector: `metadata.name=${name}` });
      hand(list.items[0]?.metadata?.labels ?? {});
      let stop = () => {};
      const ended = await new Promise<unknown>((resolve) => {
        watch
          .watch(
            '/api/v1/nodes',
            { fieldSelector: `metadata.name=${name}`, resourceVersion: list.metadata?.resourceVersion, allowWatchBookmarks: true },
            (phase, object: k8s.V1Node) => {
              if (phase === 'ADDED' || phase === 'MODIFIED') hand(object.metadata?.labels ?? {});
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
      if (ended && !signal.aborted)
        log.warning(`watching the Kubernetes Node "${name}" ended: ${(ended as Error).message ?? String(ended)}`);
    } catch (err) {
      log.warning(`following the Kubernetes Node "${name}": ${(err as Error).message}`);
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
