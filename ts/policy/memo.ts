// The answers of a pure function of a text, kept by that text: thousands of policies repeat the
// same few selectors, whose parsing and canonical formatting were most of a full compile's time.
// A call that throws keeps nothing (the next call throws the same); past `limit` answers all are
// forgotten at once, which bounds the memory whatever the texts.
export function memoized<T>(make: (key: string) => T, limit = 20_000): (key: string) => T {
  const answers = new Map<string, T>();
  return (key) => {
    if (answers.has(key)) return answers.get(key) as T;
    const answer = make(key);
    if (answers.size >= limit) answers.clear();
    answers.set(key, answer);
    return answer;
  };
}
