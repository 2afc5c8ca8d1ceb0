// NAT on this node: the `nat` part of netplug's table `inet netplug`, natOutgoing in step with the
// pools (nat-outgoing.ts) and the floating IPs of this node's pods forwarded to them
// (floating-ips.ts). A controller with one key, run from the end of start-up when the part the
// cluster makes changes (feed-trigger.ts), and every refresh interval, which also repairs the
// table; without a feed in step it reads the datastore, and again every few seconds. Once the
// table holds the part, the previous release's iptables chain is removed.
// Readiness `nat`: the last pass wrote the part. Metrics: netplug_routes{kind="masquerade"}, and
// {kind="floating"} (this node's floating IPs forwarded).
import type { NftComposer } from '../../dataplane/nft-composer.ts';
import { aborted } from '../../runtime/clock.ts';
import { Controller } from '../../runtime/controller.ts';
import { describeError } from '../../runtime/errors.ts';
import { triggerOnFeed } from '../shared/feed-trigger.ts';
import { type ClusterState, readCluster } from '../shared/read-cluster.ts';
import { routesGauge } from '../shared/routes-gauge.ts';
import type { Gate, NodeParts, Subsystem } from '../shared/subsystem.ts';
import { floatingIpChains, floatingIpsOn } from './floating-ips.ts';
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
  let notes = '';
  /** What the part is made of: the pools' natOutgoing and this node's floating IPs. */
  const wanted = (cluster: ClusterState) => {
    const { floating, notes } = floatingIpsOn(settings.nodeName, cluster.workloads);
    return { pools: cluster.pools, floating, notes, text: JSON.stringify([natOutgoingPart(cluster.pools), floating]) };
  };

  const pass = async (): Promise<boolean> => {
    const followed = feed?.current();
    const want = wanted(followed ?? (await readCluster(store)));
    const noted = want.notes.join('; ');
    if (noted !== notes && noted) log.warning(noted);
    notes = noted;
    const rules = natOutgoingRuleSet(want.pools);
    const outcome = await nat.sync(want.pools, floatingIpChains(want.floating));
    if (outcome.outcome === 'written' || outcome.outcome === 'removed')
      log.info(
        outcome.outcome === 'removed'
          ? 'NAT: no pool asks for natOutgoing and no pod here has a floating IP, chains removed'
          : `NAT: ${rules.length} natOutgoing rules, ${want.floating.length} floating IPs written`,
      );
    if (outcome.legacyRemovedFrom)
      log.info(`natOutgoing: the iptables chain of the previous release and its jump from ${outcome.legacyRemovedFrom.join(', ')} removed`);
    const written = outcome.outcome !== 'waiting';
    gauge.set(
      { kind: 'masquerade' },
      written ? rules.filter((rule) => rule.statements?.some((statement) => 'masquerade' in statement)).length : 0,
    );
    gauge.set({ kind: 'floating' }, written ? want.floating.length : 0);
    trigger?.acted(KEY, want.text);
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
  const trigger = feed && triggerOnFeed(feed, controller, { [KEY]: (cluster) => wanted(cluster).text }, { settleMs: SETTLE_MS });
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
