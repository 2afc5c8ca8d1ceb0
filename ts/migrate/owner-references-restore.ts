// Putting recorded owner references back after an upgrade, with each owner's UID as it is now:
// the owner is looked up by apiVersion, kind and name (in the object's namespace when its kind is
// namespaced). An owner that no longer exists, or whose kind is not served, is reported and its
// reference left out and kept in the record: never a dangling reference, which the garbage
// collector would take for a deleted owner. Each patch is guarded by the object's
// resourceVersion as it was just read. What was restored (or found already there) is cleared
// from the record, and the record is deleted once empty.
import {
  ApiError,
  discoverResources,
  groupOf,
  jsonPatch,
  readMetadata,
  resourcePath,
  type Api,
  type JsonPatchOperation,
  type OwnerReference,
} from './owner-references-api.ts';
import { describeDependent, describeOwner } from './owner-references-find.ts';
import { deleteRecordIfEmpty, readRecord, writeRecord, type RecordedReference } from './owner-references-record.ts';

interface Restored {
  entry: RecordedReference;
  /** The reference as it is now on the object. */
  owner: OwnerReference;
  /** added; replaced (a reference to the same owner with a stale UID was there); present (already right). */
  action: 'added' | 'replaced' | 'present';
}

export interface RestoreResult {
  restored: Restored[];
  /** Owners that no longer exist (or whose kind is not served): reference left out, kept in the record. */
  missingOwners: Array<{ key: string; entry: RecordedReference; reason: string }>;
  /** Objects deleted since the strip: nothing to restore; cleared from the record. */
  goneDependents: Array<{ key: string; entry: RecordedReference }>;
  /** The patch failed (a concurrent change, permissions): kept in the record. */
  failed: Array<{ key: string; entry: RecordedReference; error: string }>;
  /** Record keys whose value could not be read: left alone. */
  unreadableKeys: string[];
}

export async function restoreIn(api: Api): Promise<RestoreResult> {
  const record = await readRecord(api);
  const result: RestoreResult = { restored: [], missingOwners: [], goneDependents: [], failed: [], unreadableKeys: record.unreadable };
  if (record.entries.size === 0) return result;
  const { resources } = await discoverResources(api);
  const cleared = new Map<string, null>();
  const entries = [...record.entries].sort(([, a], [, b]) => describeDependent(a.dependent).localeCompare(describeDependent(b.dependent)));
  for (const [key, entry] of entries) {
    const { dependent } = entry;
    const ownerResource = resources.find(
      (resource) => resource.apiVersion === entry.owner.apiVersion && resource.kind === entry.owner.kind,
    );
    if (!ownerResource || (ownerResource.namespaced && !dependent.namespace)) {
      const reason = ownerResource
        ? 'a namespaced owner of a cluster-scoped object'
        : `no ${entry.owner.kind} is served in ${entry.owner.apiVersion}`;
      result.missingOwners.push({ key, entry, reason: `${describeOwner(entry.owner)}: ${reason}` });
      continue;
    }
    try {
      const owner = await readMetadata(api, resourcePath(ownerResource, dependent.namespace, entry.owner.name));
      if (!owner) {
        const where = ownerResource.namespaced ? ` in namespace ${dependent.namespace}` : '';
        result.missingOwners.push({ key, entry, reason: `${describeOwner(entry.owner)} no longer exists${where}` });
        continue;
      }
      const path = resourcePath(dependent, dependent.namespace, dependent.name);
      const object = await readMetadata(api, path);
      if (!object) {
        result.goneDependents.push({ key, entry });
        cleared.set(key, null);
        continue;
      }
      const wanted: OwnerReference = { ...entry.owner, uid: owner.uid };
      const references = object.ownerReferences ?? [];
      const place = references.findIndex((reference) => sameOwner(reference, wanted));
      if (place >= 0 && references[place]?.uid === wanted.uid) {
        result.restored.push({ entry, owner: wanted, action: 'present' });
        cleared.set(key, null);
        continue;
      }
      const change: JsonPatchOperation =
        place >= 0
          ? { op: 'replace', path: `/metadata/ownerReferences/${place}`, value: wanted }
          : references.length > 0
            ? { op: 'add', path: '/metadata/ownerReferences/-', value: wanted }
            : { op: 'add', path: '/metadata/ownerReferences', value: [wanted] };
      await jsonPatch(api, path, [{ op: 'test', path: '/metadata/resourceVersion', value: object.resourceVersion }, change]);
      result.restored.push({ entry, owner: wanted, action: place >= 0 ? 'replaced' : 'added' });
      cleared.set(key, null);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const error =
        err instanceof ApiError && err.patchNotApplied
          ? `${describeDependent(dependent)} changed while it was restored; run --restore again`
          : `${describeDependent(dependent)}: ${message}`;
      result.failed.push({ key, entry, error });
    }
  }
  await writeRecord(api, cleared);
  if (cleared.size === record.entries.size) await deleteRecordIfEmpty(api);
  return result;
}

/** The same owner by group, kind and name (its version may have moved on; its UID may have changed). */
const sameOwner = (a: OwnerReference, b: OwnerReference) =>
  groupOf(a.apiVersion) === groupOf(b.apiVersion) && a.kind === b.kind && a.name === b.name;
