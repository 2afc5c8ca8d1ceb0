// The upgrade's progress, kept in the cluster (ConfigMap `netplug-upgrade` in the install's
// namespace) so that `apply` resumes after being killed at any point, `status` shows where it is
// from any machine, and `rollback` has the objects as they were before each step changed them.
// Every change is a read-modify-write guarded by the ConfigMap's resourceVersion.
import { z } from 'zod';

import { isConflict, isNotFound, type Json, type ObjectRef, type UpgradeKube } from './kube.ts';
import type { Step } from './steps.ts';

const RECORD_NAME = 'netplug-upgrade';

const stepState = z.object({
  state: z.enum(['pending', 'running', 'done', 'failed', 'rolled-back']),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
  message: z.string().optional(),
  /** resourceVersions of the step's objects before it changed them (null: absent) and after. */
  before: z.record(z.string(), z.string().nullable()).optional(),
  after: z.record(z.string(), z.string().nullable()).optional(),
});

const recordSchema = z.object({
  hash: z.string(),
  target: z.string(),
  from: z.string(),
  method: z.enum(['helm', 'operator', 'manifest']),
  namespace: z.string(),
  startedAt: z.string(),
  state: z.enum(['running', 'done', 'failed', 'rolling-back', 'rolled-back']),
  current: z.string().optional(),
  message: z.string().optional(),
  steps: z.array(z.custom<Step>((v) => typeof v === 'object' && v !== null && typeof (v as Step).id === 'string')),
  progress: z.record(z.string(), stepState),
  helm: z.object({ release: z.string(), namespace: z.string(), revision: z.number() }).optional(),
  /**
   * A rollback to a release without network policy turned enforcement off first (policy-off.ts):
   * the restart it made (manifests) and the Installation's setting before (operator).
   */
  policyOff: z
    .object({ state: z.enum(['running', 'done', 'restored']), restartedAt: z.string(), previous: z.string().nullable() })
    .optional(),
});

export type UpgradeRecord = z.infer<typeof recordSchema>;

/** A saved object: as it was before the first change (null: it did not exist). */
interface Backup {
  ref: ObjectRef;
  object: Json | null;
}

export interface StoredRecord {
  record: UpgradeRecord;
  backups: Map<string, Backup>;
  resourceVersion: string;
}

export const refKey = (ref: ObjectRef) => `${ref.kind}.${ref.namespace ?? '_'}.${ref.name}`;
const backupKey = (ref: ObjectRef) => `backup.${refKey(ref)}`.replace(/[^-._a-zA-Z0-9]/g, '_');

export async function readRecord(kube: UpgradeKube, namespace: string): Promise<StoredRecord | undefined> {
  let map: Json;
  try {
    map = await kube.get({ apiVersion: 'v1', kind: 'ConfigMap', name: RECORD_NAME, namespace });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  const parsed = recordSchema.safeParse(safeJson(map.data?.['record.json']));
  if (!parsed.success)
    throw new Error(
      `ConfigMap ${namespace}/${RECORD_NAME} is not an upgrade record netplugctl can read (${parsed.error.issues[0]?.message}); delete it only if no upgrade is in progress`,
    );
  const backups = new Map<string, Backup>();
  for (const [key, value] of Object.entries(map.data ?? {}))
    if (key.startsWith('backup.')) backups.set(key, safeJson(value as string) as Backup);
  return { record: parsed.data, backups, resourceVersion: map.metadata.resourceVersion };
}

/** Creates the record; false when one exists already (another apply got there first). */
export async function createRecord(kube: UpgradeKube, record: UpgradeRecord): Promise<boolean> {
  try {
    await kube.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: RECORD_NAME, namespace: record.namespace, labels: { 'app.kubernetes.io/managed-by': 'netplugctl' } },
      data: { 'record.json': JSON.stringify(record, null, 1) },
    });
    return true;
  } catch (err) {
    if (err instanceof Error && 'status' in err && (err as { status: number }).status === 409) return false;
    throw err;
  }
}

/**
 * Changes the record: `change` gets the stored record and backups and edits them in place; written
 * with the read resourceVersion, re-read and redone on a conflict.
 */
export async function updateRecord(kube: UpgradeKube, namespace: string, change: (stored: StoredRecord) => void): Promise<StoredRecord> {
  for (let attempt = 1; ; attempt++) {
    const stored = await readRecord(kube, namespace);
    if (!stored) throw new Error(`ConfigMap ${namespace}/${RECORD_NAME} disappeared during the upgrade`);
    change(stored);
    const data: Record<string, string> = { 'record.json': JSON.stringify(stored.record, null, 1) };
    for (const [key, backup] of stored.backups) data[key] = JSON.stringify(backup);
    try {
      const written = await kube.replace({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: RECORD_NAME,
          namespace,
          resourceVersion: stored.resourceVersion,
          labels: { 'app.kubernetes.io/managed-by': 'netplugctl' },
        },
        data,
      });
      return { ...stored, resourceVersion: written.metadata.resourceVersion };
    } catch (err) {
      if (!isConflict(err) || attempt >= 10) throw err;
    }
  }
}

/** Saves the object as it is now, unless saved already (a resumed step must keep the first copy). */
export function addBackup(stored: StoredRecord, ref: ObjectRef, object: Json | undefined): void {
  const key = backupKey(ref);
  if (stored.backups.has(key)) return;
  stored.backups.set(key, { ref, object: object ? savedCopy(object) : null });
}

export const backupOf = (stored: StoredRecord, ref: ObjectRef) => stored.backups.get(backupKey(ref));

/** What a restore can put back: no status, no server-managed metadata. */
function savedCopy(object: Json): Json {
  const { status: _status, ...rest } = object;
  const { managedFields: _m, generation: _g, creationTimestamp: _c, uid: _u, selfLink: _s, ...metadata } = object.metadata ?? {};
  return { ...rest, metadata };
}

function safeJson(text: string | undefined): unknown {
  try {
    return text === undefined ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}
