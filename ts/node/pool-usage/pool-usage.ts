// IPAM usage per pool on /metrics (netplug_ipam_allocations, netplug_ipam_free_addresses), every
// OBSERVE_POOLS_INTERVAL_MS from the end of start-up (which may have made the default pool),
// counted from the cluster the datastore's watch keeps (observe-pools.ts). Metrics only: a
// datastore that does not answer is start-up's readiness check, so a failure here is a debug line.
import { every } from '../../runtime/backoff.ts';
import { describeError } from '../../runtime/errors.ts';
import { waitForSync } from '../../runtime/informers.ts';
import type { Gate, NodeParts, Subsystem } from '../shared/subsystem.ts';
import { OBSERVE_POOLS_INTERVAL_MS, observePools } from './observe-pools.ts';
import { PoolUsageMetrics } from './pool-usage-metrics.ts';

export function poolUsage(parts: NodeParts, startedUp: Gate): Subsystem {
  const { store, feed } = parts;
  const log = parts.log.child('pools');
  const metrics = new PoolUsageMetrics(parts.manager.metrics.registry);
  return {
    async run(signal) {
      if (!(await waitForSync([startedUp], signal))) return;
      await every(
        OBSERVE_POOLS_INTERVAL_MS,
        () => observePools(store, metrics, feed).catch((err: unknown) => log.debug(`pool usage: ${describeError(err)}`)),
        { signal },
      );
    },
  };
}
