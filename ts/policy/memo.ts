// Values kept by a text key, for what thousands of policies repeat: the same few selectors (whose
// parsing and canonical formatting were most of a full compile's time) and the same rule matches
// and statements (never changed once made, so one object serves every rule that has it). A make
// that throws keeps nothing (the next call throws the same); past `limit` entries all are
// forgotten at once, which bounds the memory whatever the keys.

/** A bounded cache: `kept(key, make)` is the value kept for `key`, made once. */
export function keeper(limit = 20_000): <T>(key: string, make: () => T) => T {
  const kept = new Map<string, unknown>();
  return <T>(key: string, make: () => T): T => {
    const held = kept.get(key);
    // One lookup for a value kept (has() only for one that is undefined).
    if (held !== undefined || kept.has(key)) return held as T;
    const value = make();
    if (kept.size >= limit) kept.clear();
    kept.set(key, value);
    return value;
  };
}

/** A pure function of a text, its answers kept by that text. */
export function memoized<T>(make: (key: string) => T, limit = 20_000): (key: string) => T {
  const kept = keeper(limit);
  return (key) => kept(key, () => make(key));
}
