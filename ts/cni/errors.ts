// CNI errors: the spec's error object, printed on stdout with exit code 1.

/** Well-known codes (CNI spec, "Error" section) and netplug's own (100 and up). */
export const ErrorCode = {
  IncompatibleVersion: 1,
  UnsupportedField: 2,
  UnknownContainer: 3,
  InvalidEnvironment: 4,
  IoFailure: 5,
  DecodingFailure: 6,
  InvalidConfig: 7,
  InvalidNetns: 8,
  TryAgainLater: 11,
  PluginNotAvailable: 50,
  LimitedConnectivity: 51,
  // netplug's codes
  Datastore: 100,
  KernelFailure: 101,
  CheckFailed: 102,
  IpamFailure: 103,
  AddressesExhausted: 104,
  AddressInUse: 105,
  Internal: 999,
} as const;

export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode] | number;

/** How much of a value a message repeats: input can be megabytes, an error line should not be. */
export const ECHO_LIMIT = 200;
/** A message or its details beyond this is cut: a safety net for whatever echoes input unquoted. */
const MESSAGE_LIMIT = 4096;

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

/** A failure reported to the runtime. `msg` says what is wrong, naming the field or object. */
export class CniError extends Error {
  override readonly name = 'CniError';
  readonly code: ErrorCodeValue;
  /** Further explanation; a rollback that also failed is recorded here. */
  details: string | undefined;

  constructor(code: ErrorCodeValue, msg: string, details?: string, options?: { cause?: unknown }) {
    super(shorten(msg, MESSAGE_LIMIT), options);
    this.code = code;
    this.details = details === undefined ? undefined : shorten(details, MESSAGE_LIMIT);
  }

  /** The spec's error object. */
  toJSON(cniVersion: string): { cniVersion: string; code: number; msg: string; details?: string } {
    return { cniVersion, code: this.code, msg: this.message, ...(this.details ? { details: this.details } : {}) };
  }
}

export function isCniError(value: unknown): value is CniError {
  return value instanceof CniError;
}
