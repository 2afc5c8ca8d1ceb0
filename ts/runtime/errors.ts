// One description of a failure for a log line, a readiness check or a status condition: one line,
// never a stack trace, never a credential. It knows the shapes the resident programs meet:
// - @kubernetes/client-node's ApiException (whose own message holds the whole body and headers, over
//   lines): `HTTP 403: <the Status's message>`; its watch's errors (`statusCode`);
// - etcd3 / grpc-js errors (`14 UNAVAILABLE: ...`) and netplug's own store and client errors: their
//   message;
// - Node's system errors (`connect ECONNREFUSED 10.0.0.1:2379`), fetch's `fetch failed` with the
//   cause that says why, AggregateError (every attempt of a connection to several addresses).
// Bearer tokens, passwords in URLs and `token=` / `password=` values are replaced by [redacted].
//
// API: `describeError(err)`; `apiStatus(err)` (the HTTP status of an API answer, if it was one);
// `exists(read)` (a GET's 404 as false).
import { ApiException } from '@kubernetes/client-node';

import { shorten } from '../log/echo.ts';
import { REDACTED } from '../log/redact.ts';

/** Longest description: a whole HTML error page or a list of every object is not a reason. */
const LIMIT = 1000;

export function describeError(err: unknown): string {
  return shorten(redactText(oneLine(describe(err, 0))), LIMIT);
}

function describe(err: unknown, depth: number): string {
  if (depth > 4) return '...';
  if (err instanceof ApiException) return `HTTP ${err.code}${statusMessage(err.body)}`;
  if (err instanceof AggregateError && err.errors.length > 0) {
    const parts = [...new Set(err.errors.map((inner) => describe(inner, depth + 1)))];
    return err.message ? `${err.message} (${parts.join('; ')})` : parts.join('; ');
  }
  if (err instanceof Error) {
    const status = (err as { statusCode?: unknown }).statusCode;
    let text = err.message || err.name;
    if (typeof status === 'number' && !text.includes(String(status))) text = `HTTP ${status} ${text}`;
    const { cause } = err as { cause?: unknown };
    // fetch's own message says nothing ("fetch failed"): the reason is its cause.
    if (cause !== undefined && cause !== null) {
      const why = describe(cause, depth + 1);
      if (why && !text.includes(why)) text = `${text}: ${why}`;
    }
    return text;
  }
  if (typeof err === 'object' && err !== null && typeof (err as { message?: unknown }).message === 'string')
    return (err as { message: string }).message;
  return String(err);
}

/** `: <message>` of a Kubernetes Status body (a string or already parsed), or nothing. */
function statusMessage(body: unknown): string {
  let parsed = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      return '';
    }
  }
  const message = (parsed as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' && message !== '' ? `: ${message}` : '';
}

const oneLine = (text: string) => text.replace(/\s*[\r\n]+\s*/g, ' ').trim();

/** Credentials a message may repeat (a URL with a password, a header, a query). */
function redactText(text: string): string {
  return text
    .replace(/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi, `$1 ${REDACTED}`)
    .replace(/(\/\/[^/\s:@]+):[^@\s/]+@/g, `$1:${REDACTED}@`)
    .replace(/\b(token|password|passwd|secret)=[^&\s]+/gi, `$1=${REDACTED}`);
}

/** The HTTP status of a failed Kubernetes API call (ApiException, a watch's error), if it was one. */
export function apiStatus(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  const { code, statusCode } = (err ?? {}) as { code?: unknown; statusCode?: unknown };
  if (typeof statusCode === 'number') return statusCode;
  return typeof code === 'number' && code >= 100 && code < 600 ? code : undefined;
}

/** Whether a GET found the object (false for 404); other failures are thrown. */
export async function exists(read: () => Promise<unknown>): Promise<boolean> {
  try {
    await read();
    return true;
  } catch (err) {
    if (apiStatus(err) === 404) return false;
    throw err;
  }
}
