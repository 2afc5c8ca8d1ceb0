// A key given twice in one JSON object. JSON.parse keeps the last copy, Go's encoding/json (every
// delegated plugin) decodes each copy in turn and fails on the first that does not fit: the same
// netconf would mean one thing to netplug and another to host-local or portmap. So a netconf with
// a repeated key is refused, naming it. A scan of the text rather than a second parse: a netconf
// is a few hundred bytes, and the scan keeps its own stack (no recursion, any nesting).

/** The path of the first key that appears twice in one object of `text` (valid JSON), or undefined. */
export function firstDuplicateKey(text: string): (string | number)[] | undefined {
  // One frame per open object or array: its keys so far (objects), and where in it the scan is
  // (the current key, or the current index of an array), from which a key's path is made.
  interface Frame {
    keys?: Set<string>;
    expectKey: boolean;
    at: string | number;
  }
  const stack: Frame[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const top = stack.at(-1);
    if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      if (top?.keys && top.expectKey) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (top.keys.has(key)) return [...stack.slice(0, -1).map((frame) => frame.at), key];
        top.keys.add(key);
        top.at = key;
        top.expectKey = false;
      }
      i = end;
    } else if (c === '{') stack.push({ keys: new Set(), expectKey: true, at: '' });
    else if (c === '[') stack.push({ expectKey: false, at: 0 });
    else if (c === '}' || c === ']') stack.pop();
    else if (c === ',' && top) {
      if (top.keys) top.expectKey = true;
      else top.at = (top.at as number) + 1;
    }
  }
  return undefined;
}
