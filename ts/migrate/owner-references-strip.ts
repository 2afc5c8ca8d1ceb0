// Taking owner references to netplug's resources off their objects before an upgrade: every one
// found is first written to the record (one merge patch, before any object changes, so a kill
// at any point loses nothing), then removed from its object by a JSON patch that first tests the
// reference's uid at the place it was read, so a concurrent change to the object's owner
// references is never overwritten: that patch is refused, and the record says so. Running it
// again strips what is left; what was stripped before stays recorded.
import { ApiError, jsonPatch, resourcePath, type Api, type JsonPatchOperation } from './owner-references-api.ts';
import { describeDependent, findIn, type FoundReference, type Unsearched } from './owner-references-find.ts';
import { recordKey, writeRecord, type RecordedReference } from './owner-references-record.ts';

export interface StripOptions {
  /**
   * Called once the record is written and before any object is patched: where a kill would
   * leave recorded references still on their objects, and where a test changes an object.
   */
  beforePatches?: (references: readonly FoundReference[]) => Promise<void>;
}

export interface StripResult {
  /** Every reference found, each written to the record. */
  recorded: FoundReference[];
  stripped: FoundReference[];
  /** The guarded patch was refused (the object changed since it was read) or failed: still on the object. */
  failed: Array<{ reference: FoundReference; error: string }>;
  /** The object was deleted meanwhile: nothing to strip, nor to restore. */
  gone: FoundReference[];
  unsearched: Unsearched[];
}

export async function stripIn(api: Api, options: StripOptions = {}): Promise<StripResult> {
  const { references, unsearched } = await findIn(api);
  const recordedAt = new Date().toISOString();
  const entry = (reference: FoundReference, state: RecordedReference['state'], message?: string): RecordedReference => ({
    dependent: reference.dependent,
    owner: reference.owner,
    state,
    ...(message === undefined ? {} : { message }),
    recordedAt,
  });
  await writeRecord(
    api,
    new Map(references.map((reference) => [recordKey(reference.dependent, reference.owner), entry(reference, 'recorded')])),
  );
  await options.beforePatches?.(references);

  const result: StripResult = { recorded: references, stripped: [], failed: [], gone: [], unsearched };
  const outcomes = new Map<string, RecordedReference | null>();
  for (const group of byDependent(references)) {
    const first = group[0] as FoundReference;
    try {
      await jsonPatch(api, resourcePath(first.dependent, first.dependent.namespace, first.dependent.name), removals(group));
      result.stripped.push(...group);
      for (const reference of group) outcomes.set(recordKey(reference.dependent, reference.owner), entry(reference, 'stripped'));
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        result.gone.push(...group);
        for (const reference of group) outcomes.set(recordKey(reference.dependent, reference.owner), null);
        continue;
      }
      const error = refusal(first, err);
      for (const reference of group) {
        result.failed.push({ reference, error });
        outcomes.set(recordKey(reference.dependent, reference.owner), entry(reference, 'failed', error));
      }
    }
  }
  await writeRecord(api, outcomes);
  return result;
}

/** The references of each object together: one patch per object. */
function byDependent(references: readonly FoundReference[]): FoundReference[][] {
  const groups = new Map<string, FoundReference[]>();
  for (const reference of references) {
    const group = groups.get(reference.dependent.uid) ?? [];
    group.push(reference);
    groups.set(reference.dependent.uid, group);
  }
  return [...groups.values()];
}

/** Tests of every reference's uid where it was read, then the removals, the last place first (so no place shifts). */
function removals(group: readonly FoundReference[]): JsonPatchOperation[] {
  const places = [...group].sort((a, b) => b.index - a.index);
  return [
    ...places.map((reference) => ({
      op: 'test' as const,
      path: `/metadata/ownerReferences/${reference.index}/uid`,
      value: reference.owner.uid,
    })),
    ...places.map((reference) => ({ op: 'remove' as const, path: `/metadata/ownerReferences/${reference.index}` })),
  ];
}

function refusal(reference: FoundReference, err: unknown): string {
  // A failed test (the reference moved or went), or a place no longer there (the list got shorter).
  if (err instanceof ApiError && err.patchNotApplied) {
    return `${describeDependent(reference.dependent)} changed since it was read (its owner references moved); run --strip again`;
  }
  return `${describeDependent(reference.dependent)}: ${err instanceof Error ? err.message : String(err)}`;
}
