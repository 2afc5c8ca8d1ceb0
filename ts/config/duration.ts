// Durations as the reference's environment takes them (LEAK_GRACE_PERIOD, CNI_TOKEN_REFRESH_INTERVAL):
// Go's time.ParseDuration ("15m", "1h30m", "1.5s", "300ms", "0"), and a bare number as seconds.
// Signs are refused: no interval or grace period is negative.

const UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const PART = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/;

/** Milliseconds, or undefined when `text` is no duration. */
export function parseDuration(text: string): number | undefined {
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  let rest = text;
  let total = 0;
  if (rest === '') return undefined;
  while (rest !== '') {
    const match = PART.exec(rest);
    if (!match) return undefined;
    total += Number(match[1]) * (UNITS[match[2] as string] as number);
    rest = rest.slice(match[0].length);
  }
  return total;
}
