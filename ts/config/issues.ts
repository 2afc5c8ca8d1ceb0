// Turns zod's validation issues into CNI error 7 messages that name the field and the bad value.
import type * as z from 'zod/mini';

import { CniError, describeValue, ErrorCode, shorten } from '../cni/errors.ts';

/** `ipam.ipv4_pools[1]` */
export function fieldPath(path: readonly PropertyKey[], prefix = ''): string {
  let out = prefix;
  for (const key of path) {
    out += typeof key === 'number' ? `[${key}]` : out ? `.${String(key)}` : String(key);
  }
  return out || '(top level)';
}

/** A value as it appears in JSON, shortened (ECHO_LIMIT characters, then the full length). */

/** zod's own messages start like this; any other message was written for the field and wins. */
const DEFAULT_MESSAGE = /^(Invalid|Too (small|big)|Expected|Unrecognized)/;

function problem(issue: z.core.$ZodIssue): string {
  if (!DEFAULT_MESSAGE.test(issue.message)) return issue.message;
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined ? `is required (${issue.expected})` : `must be ${article(issue.expected)}`;
    case 'too_small':
      return `must be at least ${String(issue.minimum)}${issue.origin === 'array' ? ' items long' : ''}`;
    case 'too_big':
      return `must be at most ${String(issue.maximum)}${issue.origin === 'array' ? ' items long' : ''}`;
    case 'invalid_value':
      return `must be ${issue.values.map((v) => JSON.stringify(v)).join(' or ')}`;
    case 'invalid_format':
      return `must be a valid ${issue.format}`;
    default:
      return issue.message;
  }
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

/** One line per issue: `netconf field "num_queues" must be at least 1, got 0`. */
export function describeIssues(issues: readonly z.core.$ZodIssue[], prefix = ''): string[] {
  return issues.map((issue) => {
    const field = shorten(fieldPath(issue.path, prefix));
    const got = issue.code === 'invalid_type' && issue.input === undefined ? '' : `, got ${describeValue(issue.input)}`;
    return `netconf field "${field}" ${problem(issue)}${got}`;
  });
}

/** Error 7 for invalid configuration: the first problem in `msg`, all of them in `details`. */
export function configError(lines: string[]): CniError {
  const [first = 'invalid netconf', ...rest] = lines;
  return new CniError(ErrorCode.InvalidConfig, first, rest.length ? [first, ...rest].join('; ') : undefined);
}
