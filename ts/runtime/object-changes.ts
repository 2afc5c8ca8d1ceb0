// What changed between two versions of a Kubernetes object, for handlers and reconcilers that
// must not be woken by what does not concern them (informers.ts): a status written by the
// reconciler itself, a heartbeat. Objects come typed from a list (client-node's classes,
// timestamps as Dates, no kind or apiVersion on items) and as plain JSON from a watch: the
// comparison reads their content, not their form.
//
// API: `changesOnlyStatus(before, after)`, `sameContent(a, b)`.

/** Whether `after` differs from `before` only in status and bookkeeping. */
export function changesOnlyStatus(before: unknown, after: unknown): boolean {
  return sameContent(withoutStatus(before), withoutStatus(after));
}

function withoutStatus(object: unknown): unknown {
  if (typeof object !== 'object' || object === null) return object;
  const { status: _status, kind: _kind, apiVersion: _apiVersion, metadata, ...rest } = object as Record<string, unknown>;
  if (typeof metadata !== 'object' || metadata === null) return rest;
  const { resourceVersion: _version, managedFields: _managed, ...kept } = metadata as Record<string, unknown>;
  return { ...rest, metadata: kept };
}

/**
 * Whether two values hold the same content, whatever their key order and whether they came from a
 * list (client-node's typed objects, timestamps as Dates) or a watch (plain JSON, timestamps as text).
 */
export function sameContent(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

function canonical(value: unknown): string {
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (typeof value === 'string' && TIMESTAMP.test(value)) return JSON.stringify(new Date(value).toISOString());
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null)
    return `{${Object.keys(value)
      .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  return JSON.stringify(value) ?? 'undefined';
}
