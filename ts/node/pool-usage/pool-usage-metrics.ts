// IPAM usage per pool on /metrics (observe-pools.ts sets it), on the program's registry:
//   netplug_ipam_allocations{pool}      addresses allocated in the pool's blocks, cluster-wide
//   netplug_ipam_free_addresses{pool}   addresses still free in the pool
import { Gauge, type Registry } from 'prom-client';

export class PoolUsageMetrics {
  readonly #allocations: Gauge<'pool'>;
  readonly #free: Gauge<'pool'>;
  /** The pools whose usage is set, so that deleted ones can be dropped. */
  readonly #pools = new Set<string>();

  constructor(registry: Registry) {
    this.#allocations = new Gauge({
      name: 'netplug_ipam_allocations',
      help: "Addresses allocated in the pool's blocks, cluster-wide, by pool.",
      labelNames: ['pool'] as const,
      registers: [registry],
    });
    this.#free = new Gauge({
      name: 'netplug_ipam_free_addresses',
      help: 'Addresses still free in the pool: in its blocks and in the part of it no block holds yet, by pool.',
      labelNames: ['pool'] as const,
      registers: [registry],
    });
  }

  setPoolUsage(pool: string, allocated: number, free: number): void {
    this.#pools.add(pool);
    this.#allocations.set({ pool }, allocated);
    this.#free.set({ pool }, free);
  }

  /** Drops the usage of pools not in `pools` (deleted since they were last observed). */
  keepOnlyPools(pools: readonly string[]): void {
    const kept = new Set(pools);
    for (const pool of this.#pools) {
      if (kept.has(pool)) continue;
      this.#allocations.remove({ pool });
      this.#free.remove({ pool });
      this.#pools.delete(pool);
    }
  }
}
