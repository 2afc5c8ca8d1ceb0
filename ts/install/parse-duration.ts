// Go-style durations ("90s", "1h30m", "500ms") as the reference's environment takes them; a bare
// number is seconds.

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds, or undefined when `text` is not a duration. */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  const parts = [...trimmed.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((part) => part[0]).join('') !== trimmed) return undefined;
  return parts.reduce((sum, part) => sum + Number(part[1]) * (UNIT_MS[part[2] ?? ''] ?? Number.NaN), 0);
}
