// Documents read back, checked against a zod schema: for the kinds users write with kubectl (host
// endpoints, the controllers' configuration), whose shape a schema says best. A broken one is
// reported by kind, name, key, field and the value found, never used.
import * as z from 'zod/mini';

import { fieldPath } from '../config/issues.ts';
import { describeValue } from '../log/echo.ts';
import type { Entry } from './entry.ts';
import { StoreDocumentError } from './errors.ts';

const labelsSchema = z.record(z.string(), z.string());
export const metadataSchema = z.looseObject({
  name: z.string(),
  uid: z.optional(z.string()),
  creationTimestamp: z.optional(z.string()),
  labels: z.optional(labelsSchema),
});

export function checkedBySchema<T>(schema: z.ZodMiniType<T>, kind: string, entry: Entry<unknown>): Entry<T> {
  const parsed = schema.safeParse(entry.value);
  if (parsed.success) return { ...entry, value: parsed.data };
  const [issue] = parsed.error.issues;
  const name = entry.key.slice(entry.key.lastIndexOf('/') + 1);
  const field = issue ? fieldPath(issue.path) : '(top level)';
  throw new StoreDocumentError(
    `the datastore's ${kind} "${name}" (key ${entry.key}) is broken: field "${field}" ${issue ? problem(issue, entry.value) : 'is invalid'}; repair or remove it`,
  );
}

/** What is wrong, with the value found (zod/mini's issues do not carry it). */
function problem(issue: z.core.$ZodIssue, document: unknown): string {
  const got = issue.path.reduce<unknown>((value, key) => (value as Record<PropertyKey, unknown> | undefined)?.[key], document);
  if (got === undefined) return 'is required';
  const found = `, got ${describeValue(got, 64)}`;
  switch (issue.code) {
    case 'invalid_type':
      return `must be ${/^[aeiou]/.test(issue.expected) ? 'an' : 'a'} ${issue.expected}${found}`;
    case 'invalid_value':
      return `must be ${issue.values.map((v) => JSON.stringify(v)).join(' or ')}${found}`;
    case 'too_small':
      return `must be at least ${String(issue.minimum)}${found}`;
    case 'too_big':
      return `must be at most ${String(issue.maximum)}${found}`;
    default:
      return `is invalid (${issue.message})${found}`;
  }
}
