// The node's addresses, for other nodes' routes (datastore writes only; the kernel is the routes
// subsystem's): its tunnel addresses, allocated from the pools that ask for them and given back
// when none does (tunnel-addresses.ts), and its underlay address, tunnel addresses and VXLAN MAC
// published where other nodes read them (publish-addresses.ts). A controller with one key per
// tunnel and one for publishing, level-triggered from the cluster the datastore's watch keeps:
// each reconcile works out from the cluster what is left to write (plan-addresses.ts) and writes
// only that; it is woken when something is left to write (feed-trigger.ts), and every refresh
// interval. Without a feed in step it reads the datastore, and again every few seconds.
// Readiness `addresses`: published once, and no key failing.
import { aborted } from '../../runtime/clock.ts';
import { Controller } from '../../runtime/controller.ts';
import { describeError } from '../../runtime/errors.ts';
import type { ClusterState } from '../shared/read-cluster.ts';
import { readCluster } from '../shared/read-cluster.ts';
import { triggerOnFeed } from '../shared/feed-trigger.ts';
import type { Gate, NodeParts, Subsystem } from '../shared/subsystem.ts';
import type { LocalAddress } from '../shared/this-node.ts';
import type { Tunnel } from '../shared/tunnels.ts';
import { type AddressesPlan, planAddresses, publishWork, TUNNELS, tunnelWork } from './plan-addresses.ts';
import { publishAddresses } from './publish-addresses.ts';
import { ensureTunnelAddress, TUNNEL_NAMES } from './tunnel-addresses.ts';

/** Without a feed in step: how often the datastore is read. */
const READ_INTERVAL_MS = 3_000;
/** Changes this close together are looked at once (a burst of pods changes a block per pod). */
const SETTLE_MS = 200;
const PUBLISH = 'publish';

/** What is left to do for a key of the controller, as text; undefined when nothing is. */
const workOf = (plan: AddressesPlan, key: string) => (key === PUBLISH ? publishWork(plan) : tunnelWork(plan, key as Tunnel));

export function nodeAddresses(parts: NodeParts, address: LocalAddress, startedUp: Gate): Subsystem {
  const { settings, store, kube, manager, feed } = parts;
  const log = parts.log.child('addresses');
  const name = settings.nodeName;
  const keys = [...TUNNELS, PUBLISH];
  const planOf = (cluster: ClusterState) => planAddresses(cluster, name, address.current(), address.current6());
  const failing = new Map<string, string>();
  let published = false;

  /** Writes what is left for `key`; says whether it had to read the datastore (no feed in step). */
  const reconcile = async (key: string): Promise<boolean> => {
    const followed = feed?.current();
    const plan = planOf(followed ?? (await readCluster(store)));
    const work = workOf(plan, key);
    if (key === PUBLISH) {
      if (work && plan.spec && (await publishAddresses(settings.datastoreType, store, kube, name, plan.spec, plan.published)))
        log.info(`node "${name}" published: ${JSON.stringify(plan.spec)}`);
      // No spec yet: a tunnel address is to be settled first, and its write brings this key back.
      published ||= plan.spec !== undefined;
    } else if (work) {
      const tunnel = key as Tunnel;
      const { pools, held } = plan.tunnels[tunnel];
      const address = await ensureTunnelAddress(store, name, tunnel, pools, held);
      log.info(`${TUNNEL_NAMES[tunnel]} tunnel address: ${address ?? 'none (no pool asks for one)'}`);
    }
    trigger?.acted(key, work);
    return followed === undefined;
  };
  const controller = new Controller({
    name: 'addresses',
    log,
    metrics: manager.metrics,
    resyncMs: settings.routeRefreshMs,
    backoff: { initialMs: 1000, maxMs: 30_000 },
    reconcile: async (key) => {
      try {
        const read = await reconcile(key);
        failing.delete(key);
        return read ? { requeueAfterMs: READ_INTERVAL_MS } : undefined;
      } catch (err) {
        const what = key === PUBLISH ? "the node's addresses are not published" : `no ${TUNNEL_NAMES[key as Tunnel]} tunnel address`;
        failing.set(key, `${what}: ${describeError(err)}`);
        throw err;
      }
    },
  });
  const trigger =
    feed &&
    triggerOnFeed(feed, controller, Object.fromEntries(keys.map((key) => [key, (cluster: ClusterState) => workOf(planOf(cluster), key)])), {
      settleMs: SETTLE_MS,
    });
  for (const key of keys) controller.enqueue(key);
  // The node's address moved: what is published and the tunnels' addresses are planned again from it.
  const unfollowAddress = address.onChange(() => {
    if (trigger) trigger.check();
    else for (const key of keys) controller.enqueue(key);
  });
  manager.health.add('addresses', () =>
    failing.size > 0 ? [...failing.values()].join('; ') : published ? undefined : "the node's addresses are not published yet",
  );
  manager.add(controller, { waitFor: [startedUp, address] });
  return {
    async run(signal) {
      await aborted(signal);
      unfollowAddress();
      trigger?.stop();
    },
  };
}
