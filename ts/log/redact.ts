// Keeps secrets out of logs: values under keys that name credentials are replaced.

const SECRET_KEY = /token|passw(or)?d|secret|credential|bearer|private[_-]?key|client[_-]?key(?!_?file)|authorization|cookie/i;

export const REDACTED = '[redacted]';

/** A copy of `value` with every property whose key names a credential replaced by [redacted]. */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 8 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1));
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, SECRET_KEY.test(key) ? REDACTED : redact(item, depth + 1)]));
}
