// Order statistics for benchmark samples. Nearest-rank percentiles: no interpolation, so a
// reported p99 is a time that was actually observed.

export interface Summary {
  n: number;
  medianMs: number;
  p99Ms: number;
  minMs: number;
  maxMs: number;
}

function percentile(sortedMs: readonly number[], p: number): number {
  if (sortedMs.length === 0) throw new Error('no samples');
  const rank = Math.max(1, Math.ceil((p / 100) * sortedMs.length));
  return sortedMs[rank - 1] as number;
}

export function summarize(samplesMs: readonly number[]): Summary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  return {
    n: sorted.length,
    medianMs: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    minMs: sorted[0] as number,
    maxMs: sorted[sorted.length - 1] as number,
  };
}

/** Milliseconds since `start` (from process.hrtime.bigint()). */
export function elapsedMs(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e6;
}
