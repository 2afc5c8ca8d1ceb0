// What defaulting added to a spec, as a JSON merge patch: only fields that are new or changed
// (defaults never remove a field), arrays whole. Empty when there is nothing to write back.
type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

export function defaultsPatch(before: unknown, after: unknown): Json | undefined {
  if (!isObject(after)) return undefined;
  const patch: Json = {};
  for (const [key, value] of Object.entries(after)) {
    const old = isObject(before) ? before[key] : undefined;
    if (isObject(value) && (isObject(old) || old === undefined)) {
      const inner = defaultsPatch(old, value);
      if (inner) patch[key] = inner;
    } else if (JSON.stringify(value) !== JSON.stringify(old)) patch[key] = value;
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}
