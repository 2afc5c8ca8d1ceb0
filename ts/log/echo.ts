// How a message repeats a value from input (the environment, stdin, files, the datastore): input
// can be megabytes, an error or log line should not be.

/** How much of a value a message repeats: input can be megabytes, an error line should not be. */
const ECHO_LIMIT = 200;

/** `text` as a message repeats it: at most ECHO_LIMIT characters, then an ellipsis and the length. */
export function shorten(text: string, limit = ECHO_LIMIT): string {
  return text.length > limit ? `${text.slice(0, limit)}... (${text.length} characters)` : text;
}

/** `text` in double quotes, shortened: for values from the environment, stdin or files. */
export const quote = (text: string): string => `"${shorten(text)}"`;

/** Any value as a message shows it: its JSON, shortened; never a throw, however deep it nests. */
export function describeValue(value: unknown, limit = ECHO_LIMIT): string {
  if (value === undefined) return 'nothing';
  let json: string;
  try {
    json = JSON.stringify(value) ?? String(value);
  } catch {
    // Nesting deeper than the stack (JSON.stringify recurses), or a value that is not JSON.
    json = Array.isArray(value) ? '[...]' : '{...}';
  }
  return shorten(json, limit);
}
