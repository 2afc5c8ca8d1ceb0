// The server-side dry run of every object a procedure applies (PATCH ...?dryRun=All&fieldManager=
// netplugctl&force=true): the API server validates and defaults the object as it would for real,
// and its answer, compared with the live object, gives a one-line summary of what would change.
import { describe, isNotFound, type Json, type ObjectRef, refOf, type UpgradeKube } from './kube.ts';

export interface DryRunResult {
  object: ObjectRef;
  outcome: 'create' | 'change' | 'unchanged' | 'later' | 'refused';
  summary: string;
  changed: string[];
}

export async function dryRunApply(kube: UpgradeKube, objects: readonly Json[]): Promise<DryRunResult[]> {
  const results: DryRunResult[] = [];
  for (const object of objects) {
    const ref = refOf(object);
    const live = await kube.getOrNothing(ref).catch(() => undefined);
    let after: Json;
    try {
      after = await kube.apply(object, true);
    } catch (err) {
      if (isNotFound(err) && !live)
        // A kind whose CRD an earlier step applies: the server cannot check it before.
        results.push({ object: ref, outcome: 'later', summary: 'not served yet (its CRD comes first); checked when applied', changed: [] });
      else results.push({ object: ref, outcome: 'refused', summary: `refused: ${(err as Error).message}`, changed: [] });
      continue;
    }
    if (!live) {
      results.push({ object: ref, outcome: 'create', summary: 'created', changed: [] });
      continue;
    }
    const changes = diff(comparable(live), comparable(after), '');
    const counts = (['changed', 'added', 'removed'] as const)
      .map((what) => [what, changes.filter((c) => c.what === what).length] as const)
      .filter(([, n]) => n > 0)
      .map(([what, n]) => `${n} ${what}`);
    const paths = changes.map((c) => c.path);
    results.push({
      object: ref,
      outcome: changes.length ? 'change' : 'unchanged',
      summary: changes.length ? `${counts.join(', ')}: ${shortList(paths)}` : 'unchanged',
      changed: paths,
    });
  }
  return results;
}

export const dryRunLine = (result: DryRunResult) => `${describe(result.object)}: ${result.summary}`;

function comparable(object: Json): Json {
  const { status: _status, ...rest } = object;
  const { managedFields: _m, resourceVersion: _r, generation: _g, uid: _u, creationTimestamp: _c, ...metadata } = object.metadata ?? {};
  return { ...rest, metadata };
}

interface Change {
  what: 'changed' | 'added' | 'removed';
  path: string;
}

function diff(before: unknown, after: unknown, path: string): Change[] {
  if (JSON.stringify(before) === JSON.stringify(after)) return [];
  if (before === undefined) return [{ what: 'added', path: path || '.' }];
  if (after === undefined) return [{ what: 'removed', path: path || '.' }];
  if (Array.isArray(before) && Array.isArray(after)) {
    const named = [...before, ...after].every((item) => typeof item?.name === 'string');
    if (named) {
      const names = [...new Set([...before, ...after].map((item) => item.name as string))];
      return names.flatMap((name) =>
        diff(
          before.find((item) => item.name === name),
          after.find((item) => item.name === name),
          `${path}[${name}]`,
        ),
      );
    }
    if (before.length !== after.length) return [{ what: 'changed', path }];
    return before.flatMap((item, i) => diff(item, after[i], `${path}[${i}]`));
  }
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    return keys.flatMap((key) => diff(before[key], after[key], `${path}.${key}`));
  }
  return [{ what: 'changed', path: path || '.' }];
}

const shortList = (paths: string[]) =>
  paths.length <= 3 ? paths.join(', ') : `${paths.slice(0, 3).join(', ')} and ${paths.length - 3} more`;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
