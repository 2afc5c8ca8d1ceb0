// The record of owner references taken off objects for an upgrade: ConfigMap
// kube-system/netplug-owner-references, one key per reference (`<dependent uid>.<owner uid>`), its
// value the JSON of a RecordedReference. One key each, so that every write is a merge patch of
// its own keys (no read-modify-write of a shared list to lose to a concurrent run).
//
// Why kube-system: it exists in every cluster and no netplug upgrade, uninstall or reinstall
// removes it (netplug-system can be deleted and recreated on the way, and the operator's clean-up
// deletes what it owns); only administrators write there. The record must outlive netplugctl (a
// kill mid-way loses nothing), and it is owned by nothing, so no garbage collection can take it.
import * as z from 'zod/mini';

import { ApiError, mergePatch, type Api } from './owner-references-api.ts';

export const RECORD_NAMESPACE = 'kube-system';
export const RECORD_NAME = 'netplug-owner-references';
const RECORD_PATH = `/api/v1/namespaces/${RECORD_NAMESPACE}/configmaps/${RECORD_NAME}`;

const dependentSchema = z.object({
  apiVersion: z.string(),
  resource: z.string(),
  kind: z.string(),
  namespaced: z.boolean(),
  namespace: z.optional(z.string()),
  name: z.string(),
  uid: z.string(),
});

const ownerSchema = z.object({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: z.optional(z.boolean()),
  blockOwnerDeletion: z.optional(z.boolean()),
});

const entrySchema = z.object({
  dependent: dependentSchema,
  owner: ownerSchema,
  /** recorded: written down, not yet taken off; stripped: taken off; failed: the guarded patch was refused (message). */
  state: z.enum(['recorded', 'stripped', 'failed']),
  message: z.optional(z.string()),
  /** When the reference was recorded (RFC 3339). */
  recordedAt: z.string(),
});

/** The object that holds a reference: where it is served and which it is. */
export type Dependent = z.infer<typeof dependentSchema>;
export type RecordedReference = z.infer<typeof entrySchema>;

/** The record's key of a reference: both UIDs, which ConfigMap keys allow ([-._a-zA-Z0-9]). */
export const recordKey = (dependent: Pick<Dependent, 'uid'>, owner: { uid: string }) => `${dependent.uid}.${owner.uid}`;

export interface OwnerReferencesRecord {
  entries: Map<string, RecordedReference>;
  /** Keys whose value is not a recorded reference (edited by hand?): left alone, reported. */
  unreadable: string[];
  /** The ConfigMap's resourceVersion; undefined when there is no record. */
  resourceVersion?: string;
}

export async function readRecord(api: Api): Promise<OwnerReferencesRecord> {
  let configMap: { metadata: { resourceVersion: string }; data?: { [key: string]: string } };
  try {
    configMap = (await api.request('GET', RECORD_PATH)) as typeof configMap;
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return { entries: new Map(), unreadable: [] };
    throw err;
  }
  const entries = new Map<string, RecordedReference>();
  const unreadable: string[] = [];
  for (const [key, value] of Object.entries(configMap.data ?? {})) {
    const parsed = z.safeParse(entrySchema, parseJson(value));
    if (parsed.success) entries.set(key, parsed.data);
    else unreadable.push(key);
  }
  return { entries, unreadable, resourceVersion: configMap.metadata.resourceVersion };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Writes (an entry) or removes (null) the given keys, creating the record when it is not there. */
export async function writeRecord(api: Api, changes: Map<string, RecordedReference | null>): Promise<void> {
  if (changes.size === 0) return;
  const data = Object.fromEntries([...changes].map(([key, entry]) => [key, entry === null ? null : JSON.stringify(entry)]));
  try {
    await mergePatch(api, RECORD_PATH, { data });
    return;
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) throw err;
  }
  const created = Object.fromEntries(Object.entries(data).filter((pair): pair is [string, string] => pair[1] !== null));
  if (Object.keys(created).length === 0) return;
  try {
    await api.request('POST', `/api/v1/namespaces/${RECORD_NAMESPACE}/configmaps`, {
      body: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: RECORD_NAME, namespace: RECORD_NAMESPACE, labels: { 'app.kubernetes.io/managed-by': 'netplugctl' } },
        data: created,
      },
    });
  } catch (err) {
    // Created meanwhile by another run: patch that one.
    if (!(err instanceof ApiError && err.status === 409)) throw err;
    await mergePatch(api, RECORD_PATH, { data });
  }
}

/** Deletes the record when nothing is left in it, unless it changed since it was read empty. */
export async function deleteRecordIfEmpty(api: Api): Promise<void> {
  const record = await readRecord(api);
  if (record.resourceVersion === undefined || record.entries.size > 0 || record.unreadable.length > 0) return;
  try {
    await api.request('DELETE', RECORD_PATH, { body: { preconditions: { resourceVersion: record.resourceVersion } } });
  } catch (err) {
    // Gone already, or written meanwhile (a conflict on the precondition): either way, keep going.
    if (!(err instanceof ApiError && (err.status === 404 || err.status === 409))) throw err;
  }
}
