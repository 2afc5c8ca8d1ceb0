// CNI errors: the spec's error object, printed on stdout with exit code 1.
import { shorten } from '../log/echo.ts';

// How messages repeat input lives in log/echo.ts, below both the errors and the logger.
export { describeValue, quote, shorten } from '../log/echo.ts';

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

/** A message or its details beyond this is cut: a safety net for whatever echoes input unquoted. */
const MESSAGE_LIMIT = 4096;

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
