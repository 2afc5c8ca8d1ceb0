// Follows one part of the Kubernetes Node this agent runs on (its pod CIDRs: what `select` picks)
// through the agent's shared informer of it (ts/node/shared/this-node.ts): listed, then watched
// from that version, listed again after a failure. Each new value seen is handed on in order, one
// at a time; `select` gets undefined when a list finds no such Node (a deletion seen by the watch
// is not handed on: the Node's next version is).
import type * as k8s from '@kubernetes/client-node';

import { describeError } from '../../runtime/errors.ts';
import type { Informer } from '../../runtime/informers.ts';
import type { Log } from '../../runtime/log.ts';

export interface NodeFollower<T> {
  /** What is followed, for log lines ("pod CIDRs"). */
  what: string;
  select(node: k8s.V1Node | undefined): T;
  onChange(value: T): Promise<void>;
  /** The Node could not be read (it is read again shortly). */
  onError?(message: string): void;
}

/**
 * Follows until `stop`, which resolves once the last change handed on is handled. `onChange`
 * failures are logged; the next change tries again.
 */
export function followNode<T>(node: Informer<k8s.V1Node>, name: string, follower: NodeFollower<T>, log: Log): { stop(): Promise<void> } {
  let queue = Promise.resolve();
  let last: string | undefined;
  const hand = (found: k8s.V1Node | undefined) => {
    const value = follower.select(found);
    const text = JSON.stringify(value);
    if (text === last) return;
    last = text;
    queue = queue.then(() =>
      follower.onChange(value).catch((err: unknown) => {
        last = undefined; // so that the next event (or list) tries again
        log.warning(`node "${name}": ${follower.what} not written: ${describeError(err)}`);
      }),
    );
  };
  const remove = node.addHandler({
    // Called once the list is in, and again after each failure.
    synced: () => hand(node.get(name)),
    add: hand,
    update: (object) => hand(object),
    failed: (err) => follower.onError?.(describeError(err)),
  });
  return {
    stop: async () => {
      remove();
      await queue;
    },
  };
}
