// natOutgoing on this node: the `nat` part of netplug's table `inet netplug` (nat-outgoing.ts), in
// step with the pools. A controller with one key, run from the end of start-up when the part the
// pools make changes (feed-trigger.ts), and every refresh interval, which also repairs the table;
// without a feed in step it reads the datastore, and again every few seconds. Once the table holds
// the part, the previous release's iptables chain is removed.
// Readiness `nat`: the last pass wrote the part. Metrics: netplug_routes{kind="masquerade"}.
import type { NftComposer } from '../../dataplane/nft-composer.ts';
import { aborted } from '../../runtime/clock.ts';
import { Controller } from '../../runtime/controller.ts';
import { describeError } from '../../runtime/errors.ts';
import { triggerOnFeed } from '../shared/feed-trigger.ts';
import { readCluster } from '../shared/read-cluster.ts';
import { routesGauge } from '../shared/routes-gauge.ts';
import type { Gate, NodeParts, Subsystem } from '../shared/subsystem.ts';
import { NatOutgoing, natOutgoingPart, natOutgoingRuleSet } from './nat-outgoing.ts';

export { NAT_PART } from './nat-outgoing.ts';

/** Without a feed in step: how often the datastore is read. */
const READ_INTERVAL_MS = 3_000;
const SETTLE_MS = 200;
const KEY = 'nat-outgoing';

export function natOutgoing(parts: NodeParts, table: NftComposer, startedUp: Gate): Subsystem {
  const { settings, store, manager, feed } = parts;
  const log = parts.log.child('nat');
  const nat = new NatOutgoing(table);
  const gauge = routesGauge(manager.metrics.registry);
  let problem: string | undefined = 'natOutgoing is not programmed yet';

  const pass = async (): Promise<boolean> => {
    const followed = feed?.current();
    const { pools } = followed ?? (await readCluster(store));
    const rules = natOutgoingRuleSet(pools);
    const outcome = await nat.sync(pools);
    if (outcome.outcome === 'written' || outcome.outcome === 'removed')
      log.info(`natOutgoing: ${outcome.outcome === 'removed' ? 'no pool asks for it, chain removed' : `${rules.length} rules written`}`);
    if (outcome.legacyRemovedFrom)
      log.info(`natOutgoing: the iptables chain of the previous release and its jump from ${outcome.legacyRemovedFrom.join(', ')} removed`);
    const masquerading = outcome.outcome !== 'waiting';
    gauge.set(
      { kind: 'masquerade' },
      masquerading ? rules.filter((rule) => rule.statements?.some((statement) => 'masquerade' in statement)).length : 0,
    );
    trigger?.acted(KEY, JSON.stringify(natOutgoingPart(pools)));
    return followed === undefined;
  };
  const controller = new Controller({
    name: 'nat',
    log,
    metrics: manager.metrics,
    resyncMs: settings.routeRefreshMs,
    backoff: { initialMs: 1000, maxMs: 30_000 },
    reconcile: async () => {
      try {
        const read = await pass();
        problem = undefined;
        return read ? { requeueAfterMs: READ_INTERVAL_MS } : undefined;
      } catch (err) {
        // The controller logs the failure.
        problem = `natOutgoing is not programmed: ${describeError(err)}`;
        throw err;
      }
    },
  });
  const trigger =
    feed &&
    triggerOnFeed(feed, controller, { [KEY]: (cluster) => JSON.stringify(natOutgoingPart(cluster.pools)) }, { settleMs: SETTLE_MS });
  controller.enqueue(KEY);
  manager.health.add('nat', () => problem);
  manager.add(controller, { waitFor: [startedUp] });
  return {
    async run(signal) {
      await aborted(signal);
      trigger?.stop();
    },
  };
}
