// A small seeded PRNG (mulberry32) for the fuzz suite. One seed per run, printed with every failure
// and settable with NETPLUG_FUZZ_SEED, so any failing case can be replayed exactly; each target and
// case derives its own stream from it, so a case's input does not depend on the cases before it.

/**
 * The run's seed: NETPLUG_FUZZ_SEED if set (decimal or 0x hex; "random" for a fresh one), else a
 * fixed one, so that `npm test` runs the same cases every time (main stays green by its own code,
 * not by the luck of the draw) and exploring new cases is a deliberate run with "random".
 */
export const DEFAULT_FUZZ_SEED = 20261123;
export const FUZZ_SEED: number = (() => {
  const given = process.env['NETPLUG_FUZZ_SEED'];
  if (given === 'random') return (Date.now() ^ (process.pid << 16)) >>> 0;
  if (given !== undefined && given !== '') {
    const seed = Number(given);
    if (!Number.isSafeInteger(seed)) throw new Error(`NETPLUG_FUZZ_SEED "${given}" is not an integer or "random"`);
    return seed >>> 0;
  }
  return DEFAULT_FUZZ_SEED;
})();

/** How to replay a case, for failure messages. */
export const replay = (target: string, index: number) => `NETPLUG_FUZZ_SEED=${FUZZ_SEED} ${target}#${index}`;

/** FNV-1a of a string, to mix target names into seeds. */
function fnv(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 0;
}

export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** The stream of case `index` of `target` in this run. */
  static forCase(target: string, index: number): Rng {
    return new Rng((FUZZ_SEED ^ fnv(target) ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0);
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
}
