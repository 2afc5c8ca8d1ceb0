// What network policy dropped on this node, on /metrics: the kernel's named counters of netplug's
// table, read when /metrics is scraped (at most once a second; the packets' path never waits for it):
//   netplug_policy_denied_packets_total{policy,kind}          by the Deny rules of a programmed policy or profile
//   netplug_policy_denied_bytes_total{policy,kind}
//   netplug_policy_default_denied_packets_total{reason}       by no rule: no-policy-allowed, interface-not-programmed
//   netplug_policy_default_denied_bytes_total{reason}
// Counters, not gauges, as Prometheus users expect of `_total`: the kernel's count only grows while
// its counter lives, and starts again from 0 when the counter is made anew (a policy that selects
// no local pod any more and then does again, a table written whole after enforcement was off),
// which is a counter reset that rate() and increase() handle. `policy` is the policy's name as
// people write it (`<namespace>/<name>`, or `<name>`), `kind` its kind; a policy without Deny
// rules has no series.
import { performance } from 'node:perf_hooks';

import { Counter, type Registry } from 'prom-client';

import type { NftCounterValue } from '../../dataplane/nftables.ts';
import type { Logger } from '../../log/logger.ts';
import { DEFAULT_DENY_COUNTERS } from '../../policy/names.ts';
import type { PolicyProgram } from '../../policy/program.ts';
import { describeError } from '../../runtime/errors.ts';

/** A scrape within this long of the last read uses its counts. */
const READ_EVERY_MS = 1_000;

const REASONS: Record<string, string> = {
  [DEFAULT_DENY_COUNTERS.noPolicyAllowed]: 'no-policy-allowed',
  [DEFAULT_DENY_COUNTERS.failClosed]: 'interface-not-programmed',
};

export interface DeniedCountersOptions {
  registry: Registry;
  /** The named counters of netplug's table now. */
  read(): Promise<Map<string, NftCounterValue>>;
  /** The programmed policies by the name of their deny counter (PolicyEngine.denyCounters). */
  owners(): ReadonlyMap<string, Pick<PolicyProgram, 'kind' | 'display' | 'ingress' | 'egress'>>;
  log: Logger;
}

type Read = { counters: Map<string, NftCounterValue> } | undefined;
type Series = { name: string; field: keyof NftCounterValue };
const WHAT = { packets: 'Packets', bytes: 'Bytes' } as const;

/** Registers the four metrics on `options.registry`. */
export function registerDeniedCounters(options: DeniedCountersOptions): void {
  const registers = [options.registry];
  let last: Promise<Read> | undefined;
  let readAt = Number.NEGATIVE_INFINITY;
  let lastProblem: string | undefined;
  /** The counters as last read, read again when that is older than READ_EVERY_MS; undefined if the read failed. */
  const counters = (): Promise<Read> => {
    const now = performance.now();
    if (last && now - readAt < READ_EVERY_MS) return last;
    readAt = now;
    last = options.read().then(
      (read) => {
        lastProblem = undefined;
        return { counters: read };
      },
      (err: unknown) => {
        // No table yet (the first pass has not written it): nothing to count, nothing to say.
        if ((err as { code?: string }).code === 'ENOENT') return undefined;
        const problem = describeError(err);
        if (problem !== lastProblem) options.log.warning(`cannot read the policy drop counters: ${problem}`);
        lastProblem = problem;
        return undefined;
      },
    );
    return last;
  };

  const byPolicy = ({ name, field }: Series) => {
    const metric: Counter<'policy' | 'kind'> = new Counter({
      name,
      help: `${WHAT[field]} dropped on this node by the Deny rules of a network policy or profile (policy: its namespace/name or name; kind: NetworkPolicy, GlobalNetworkPolicy, Profile), from netplug's nftables counters.`,
      labelNames: ['policy', 'kind'] as const,
      registers,
      collect: async () => {
        const read = await counters();
        metric.reset();
        if (!read) return;
        for (const [counter, owner] of options.owners()) {
          const value = read.counters.get(counter);
          if (value && hasDeny(owner)) metric.inc({ policy: owner.display, kind: owner.kind }, value[field]);
        }
      },
    });
  };
  const byDefault = ({ name, field }: Series) => {
    const metric: Counter<'reason'> = new Counter({
      name,
      help: `${WHAT[field]} dropped on this node that no policy rule decided, by reason: no-policy-allowed (policies selected the pod and none of a tier allowed it, or no policy or profile did), interface-not-programmed (a workload interface not dispatched: fail closed).`,
      labelNames: ['reason'] as const,
      registers,
      collect: async () => {
        const read = await counters();
        metric.reset();
        if (!read) return;
        for (const [counter, reason] of Object.entries(REASONS)) {
          const value = read.counters.get(counter);
          if (value) metric.inc({ reason }, value[field]);
        }
      },
    });
  };
  byPolicy({ name: 'netplug_policy_denied_packets_total', field: 'packets' });
  byPolicy({ name: 'netplug_policy_denied_bytes_total', field: 'bytes' });
  byDefault({ name: 'netplug_policy_default_denied_packets_total', field: 'packets' });
  byDefault({ name: 'netplug_policy_default_denied_bytes_total', field: 'bytes' });
}

const hasDeny = (program: Pick<PolicyProgram, 'ingress' | 'egress'>) =>
  [program.ingress, program.egress].some((rules) => rules?.some((rule) => rule.action === 'Deny'));
