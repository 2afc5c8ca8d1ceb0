// The pod's interface set up while its addresses' commit is in flight: the commit (a datastore
// round trip) and the kernel work (the veth, addresses, routes) are each about a millisecond, and
// one need not wait for the other. Nothing is reported before the commit succeeds; if it lost a
// race and committed other addresses, the early interface is removed and made again with them.
// The host routes, the one part another workload could hold (one that won the same addresses in
// a race), are added only once the commit succeeded.
import type { WorkloadInterfaces } from '../dataplane/index.ts';

type Settled = { made: WorkloadInterfaces } | { failed: unknown };

export class WiringAhead {
  private readonly wire: (addresses: readonly string[]) => Promise<WorkloadInterfaces>;
  private readonly unwire: () => Promise<unknown>;
  private readonly route: (addresses: readonly string[]) => Promise<void>;
  private ahead: { addresses: readonly string[]; settled: Promise<Settled> } | undefined;

  /** `wire` sets the interface up with the addresses but no host routes; `route` adds them; `unwire` removes the interface. */
  constructor(
    wire: (addresses: readonly string[]) => Promise<WorkloadInterfaces>,
    route: (addresses: readonly string[]) => Promise<void>,
    unwire: () => Promise<unknown>,
  ) {
    this.wire = wire;
    this.route = route;
    this.unwire = unwire;
  }

  /** Whether a set-up was started and not yet taken or abandoned. */
  get started(): boolean {
    return this.ahead !== undefined;
  }

  /** The allocation's first plan starts the set-up; a retry's plan is left to take(). */
  readonly planned = (addresses: readonly string[]): void => {
    if (this.ahead || addresses.length === 0) return;
    this.ahead = {
      addresses: [...addresses],
      settled: this.wire(addresses).then(
        (made) => ({ made }),
        (failed: unknown) => ({ failed }),
      ),
    };
  };

  /**
   * The interface made ahead for `addresses` (what was committed), or undefined if none was
   * (nothing started, or for other addresses, now removed), its host routes added. Its set-up's
   * failure is thrown, and the host routes': the caller removes the interface.
   */
  async take(addresses: readonly string[]): Promise<WorkloadInterfaces | undefined> {
    if (!this.ahead) return undefined;
    const { addresses: planned, settled } = this.ahead;
    this.ahead = undefined;
    const outcome = await settled;
    const same = planned.length === addresses.length && planned.every((a, i) => a === addresses[i]);
    if (same) {
      if ('failed' in outcome) throw outcome.failed;
      await this.route(addresses);
      return outcome.made;
    }
    if ('made' in outcome) await this.unwire();
    return undefined;
  }

  /** The allocation failed: whatever was set up ahead is removed. */
  async abandon(): Promise<void> {
    if (!this.ahead) return;
    const { settled } = this.ahead;
    this.ahead = undefined;
    if ('made' in (await settled)) await this.unwire();
  }
}
