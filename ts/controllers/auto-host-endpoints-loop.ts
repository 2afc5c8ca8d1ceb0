// The automatic host endpoints' loop: a pass when the Node cache first completes, when a node
// comes or goes or its labels or InternalIP addresses change (status heartbeats do not count),
// when KubeControllersConfiguration default's spec changes (read every CONFIG_POLL_MS, on either
// datastore: one small GET), and every period besides (so a host endpoint someone edited or
// deleted is put back).
import type * as k8s from '@kubernetes/client-node';

import type { Store } from '../store/store.ts';
import { readConfiguration } from './auto-host-endpoints-resources.ts';
import { reconcileAutoHostEndpoints, type AutoHostEndpointsState } from './auto-host-endpoints.ts';
import type { ControllerLog } from './log.ts';
import { runLoop, type Loop } from './run-loop.ts';
import type { WatchedObjects } from '../k8s/watch-objects.ts';

const PERIOD_MS = 60_000;
const CONFIG_POLL_MS = 2_000;

export interface AutoHostEndpoints extends Loop {
  /** The Node informer's events. */
  nodeEvent(verb: 'add' | 'update' | 'delete', node: k8s.V1Node): void;
}

export function startAutoHostEndpoints(options: {
  store: Store;
  nodes: WatchedObjects<k8s.V1Node>;
  nodeExists: (name: string) => Promise<boolean>;
  signal: AbortSignal;
  log: ControllerLog;
}): AutoHostEndpoints {
  const { store, nodes, signal, log } = options;
  const state: AutoHostEndpointsState = {
    store,
    nodes: () => (nodes.synced() ? nodes.list() : undefined),
    nodeExists: options.nodeExists,
    log,
    reported: new Set<string>(),
  };
  const loop = runLoop('host endpoint', () => reconcileAutoHostEndpoints(state).then(() => undefined), PERIOD_MS, signal, log);

  const seen = new Map<string, string>();
  const nodeEvent = (verb: 'add' | 'update' | 'delete', node: k8s.V1Node) => {
    const name = node.metadata?.name ?? '';
    const addresses = (node.status?.addresses ?? []).filter((address) => address.type === 'InternalIP').map((address) => address.address);
    const now = JSON.stringify([node.metadata?.labels ?? {}, addresses]);
    if (verb === 'delete') seen.delete(name);
    else if (seen.get(name) === now) return;
    else seen.set(name, now);
    loop.trigger();
  };

  // Compared with what the last pass read; a failed read is the next pass's to report.
  let reading = false;
  const poll = setInterval(() => {
    if (reading) return;
    reading = true;
    readConfiguration(store)
      .then(
        (found) => {
          if (state.seenSpec !== undefined && JSON.stringify(found?.value.spec) !== state.seenSpec) loop.trigger();
        },
        () => undefined,
      )
      .finally(() => {
        reading = false;
      });
  }, CONFIG_POLL_MS);
  poll.unref();
  signal.addEventListener('abort', () => clearInterval(poll), { once: true });

  return { ...loop, nodeEvent };
}
