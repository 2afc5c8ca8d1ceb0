// Routes to other nodes' pods (the kernel only: it writes nothing to the datastore): a controller
// with one key that computes from the cluster what the kernel should hold (kernel-state.ts) and
// makes it so (program-kernel.ts). It runs from the end of start-up when what the kernel should
// hold changes (feed-trigger.ts: not on a change that leaves it as it is, such as a pod's address
// on another node, or this node's addresses being published), and every refresh interval, which
// also repairs what someone changed by hand. Without a feed in step it reads the datastore whole,
// and again every few seconds. A failure is retried after a backoff.
// Readiness `routes`: the last pass programmed everything. Metrics: netplug_routes{kind} (direct,
// ipip, vxlan).
import { aborted } from '../../runtime/clock.ts';
import { Controller } from '../../runtime/controller.ts';
import { describeError } from '../../runtime/errors.ts';
import { triggerOnFeed } from '../shared/feed-trigger.ts';
import { type ClusterState, readCluster } from '../shared/read-cluster.ts';
import { routesGauge } from '../shared/routes-gauge.ts';
import type { Gate, NodeParts, Subsystem } from '../shared/subsystem.ts';
import type { LocalAddress } from '../shared/this-node.ts';
import { kernelState } from './kernel-state.ts';
import { KernelProgrammer } from './program-kernel.ts';
import { RouteNotes } from './route-notes.ts';

/** Without a feed in step: how often the datastore is read. */
const READ_INTERVAL_MS = 3_000;
/** Changes this close together make one pass (a burst of pods changes a block per pod). */
const SETTLE_MS = 200;
const KEY = 'routes';

export function routesToOtherNodes(parts: NodeParts, address: LocalAddress, startedUp: Gate): Subsystem {
  const { settings, store, manager, feed } = parts;
  const log = parts.log.child('routes');
  const name = settings.nodeName;
  const kernel = new KernelProgrammer();
  const gauge = routesGauge(manager.metrics.registry);
  let problem: string | undefined = 'routes to other nodes are not programmed yet';
  const notes = new RouteNotes(log);
  let summary = '';
  // A host-local install is one with USE_POD_CIDR=true (pods take their addresses from each Node's
  // spec.podCIDRs, which are then routed): what the spec has host-local installs set on this
  // container, and what the manifests' host-local variant and the operator's HostLocal set. Not
  // the conflist's ipam.type: the agent does not read the CNI configuration. The policy-only
  // variant sets it too, with NETPLUG_NETWORKING_BACKEND=none: this subsystem does not run there.
  const podCidrs = settings.usePodCidr;
  if (podCidrs && settings.datastoreType === 'etcdv3')
    log.warning('USE_POD_CIDR is true on the etcd datastore, whose Nodes carry no pod CIDRs: no pod CIDR is routed between nodes');
  const stateOf = (cluster: ClusterState) => kernelState(cluster, name, address.current(), podCidrs, address.current6());

  /** One pass; says when to look again: soon without a feed in step, or when a note is due to become a warning. */
  const pass = async (): Promise<number | undefined> => {
    const followed = feed?.current();
    const want = stateOf(followed ?? (await readCluster(store)));
    const due = notes.seen(want.notes);
    const { counts, failed } = await kernel.program(want);
    const now = `${counts.direct} direct, ${counts.ipip} IP-in-IP, ${counts.vxlan} VXLAN routes`;
    if (now !== summary) log.info(`routes to other nodes: ${now}`);
    summary = now;
    for (const kind of ['direct', 'ipip', 'vxlan'] as const) gauge.set({ kind }, counts[kind]);
    if (failed) throw new Error(failed);
    trigger?.acted(KEY, JSON.stringify(want));
    if (followed === undefined) return Math.min(READ_INTERVAL_MS, due ?? READ_INTERVAL_MS);
    return due;
  };
  const controller = new Controller({
    name: 'routes',
    log,
    metrics: manager.metrics,
    resyncMs: settings.routeRefreshMs,
    backoff: { initialMs: 1000, maxMs: 30_000 },
    reconcile: async () => {
      try {
        const again = await pass();
        problem = undefined;
        return again === undefined ? undefined : { requeueAfterMs: again };
      } catch (err) {
        // The controller logs the failure.
        problem = `routes to other nodes are not programmed: ${describeError(err)}`;
        throw err;
      }
    },
  });
  const trigger =
    feed && triggerOnFeed(feed, controller, { [KEY]: (cluster) => JSON.stringify(stateOf(cluster)) }, { settleMs: SETTLE_MS });
  controller.enqueue(KEY);
  // The node's address moved: the routes are made again from it (if they change).
  const unfollowAddress = address.onChange(() => (trigger ? trigger.check() : controller.enqueue(KEY)));
  manager.health.add('routes', () => problem);
  manager.add(controller, { waitFor: [startedUp, address] });
  return {
    async run(signal) {
      await aborted(signal);
      unfollowAddress();
      trigger?.stop();
    },
  };
}
