// What starts a subsystem's reconcile from the datastore's watch (cluster-feed.ts): not every
// change it hears (every pod's address changes a block somewhere in the cluster), but a change of
// what the subsystem acts on. Once a burst of changes has settled, each key's `view` makes of the
// followed cluster what its reconcile would act on (the kernel state it would program, the writes
// it would make) as text, and the key is enqueued only when that differs from what the key last
// saw or acted on. A view of undefined means nothing to do: a subsystem whose view is the writes it
// still has to make is not woken by its own writes, which leave it nothing to do. A feed out of
// step enqueues every key once: the reconcile then reads the datastore itself, and asks to be run
// again until the feed is back in step.
import { type Clock, systemClock, type Timer } from '../../runtime/clock.ts';
import type { Controller } from '../../runtime/controller.ts';
import { describeError } from '../../runtime/errors.ts';
import type { ClusterFeed } from './cluster-feed.ts';
import type { ClusterState } from './read-cluster.ts';

/** What a key's reconcile would act on, as text; undefined when it has nothing to do. */
export type View = (cluster: ClusterState) => string | undefined;

export interface FeedTrigger {
  /** What a reconcile of `key` acted on: the same view later enqueues nothing. */
  acted(key: string, view: string | undefined): void;
  /** Looks at the feed now (and the keys' views), as after a change. */
  check(): void;
  stop(): void;
}

const OUT_OF_STEP = '\u0000out of step';

/** A view that cannot be made (the node's address unknown, say) enqueues its key: the reconcile then fails, naming why. */
function viewOf(view: View, cluster: ClusterState): string | undefined {
  try {
    return view(cluster);
  } catch (err) {
    return `\u0000failed: ${describeError(err)}`;
  }
}

export function triggerOnFeed(
  feed: Pick<ClusterFeed, 'current' | 'subscribe'>,
  controller: Pick<Controller, 'enqueue'>,
  views: Readonly<Record<string, View>>,
  options: { settleMs: number; clock?: Clock },
): FeedTrigger {
  const clock = options.clock ?? systemClock;
  const seen = new Map<string, string | undefined>();
  let timer: Timer | undefined;
  const check = () => {
    timer?.cancel();
    timer = undefined;
    const cluster = feed.current();
    for (const [key, view] of Object.entries(views)) {
      const now = cluster ? viewOf(view, cluster) : OUT_OF_STEP;
      if (now === seen.get(key)) continue;
      seen.set(key, now);
      if (now !== undefined) controller.enqueue(key);
    }
  };
  const unsubscribe = feed.subscribe(() => {
    timer ??= clock.after(options.settleMs, check);
  });
  return {
    acted: (key, view) => void seen.set(key, view),
    check,
    stop: () => {
      unsubscribe();
      timer?.cancel();
    },
  };
}
