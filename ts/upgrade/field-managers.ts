// The stale-field trap of server-side apply: fields that
// `kubectl create`, client-side `kubectl apply` or `kubectl edit` set are owned by those managers, so
// an apply of a new manifest that drops them leaves them on the object. The audit lists them; the
// migration moves the legacy managers' fields to netplugctl's apply entry (kubectl's csaupgrade does
// this for kubectl-client-side-apply only), guarded by resourceVersion, so the next apply by
// netplugctl prunes what the new manifest no longer has.
import { describe, type Json, type ObjectRef, refOf, type UpgradeKube, FIELD_MANAGER, isConflict } from './kube.ts';

const LEGACY_MANAGERS = ['kubectl-create', 'kubectl-client-side-apply', 'kubectl-edit'] as const;

export interface LegacyFields {
  object: ObjectRef;
  manager: string;
  /** Paths the legacy manager owns that the new object no longer has: they would survive the apply. */
  dropped: string[];
}

const isLegacy = (entry: Json) =>
  (LEGACY_MANAGERS as readonly string[]).includes(entry.manager) && entry.operation === 'Update' && !entry.subresource;

/**
 * For each desired object that exists, the legacy managers' fields it drops. Legacy managers own
 * the server's defaults too (a create records the defaulted object): a field counts as dropped
 * only when the new object, defaulted by the server (a dry-run create of a renamed copy), lacks it.
 */
export async function auditFieldManagers(kube: UpgradeKube, desired: readonly Json[]): Promise<LegacyFields[]> {
  const found: LegacyFields[] = [];
  for (const object of desired) {
    const live = await kube.getOrNothing(refOf(object));
    const legacy = (live?.metadata?.managedFields ?? []).filter(isLegacy);
    if (legacy.length === 0) continue;
    const defaulted = await defaultedCopy(kube, object);
    for (const entry of legacy) {
      const dropped = droppedPaths(entry.fieldsV1 ?? {}, defaulted, '').filter((path) => !SERVER_SET.includes(path));
      found.push({ object: refOf(object), manager: entry.manager, dropped });
    }
  }
  return found;
}

/** Set by the API server itself on every write, whoever owns them. */
const SERVER_SET = ['.metadata.annotations.deprecated.daemonset.template.generation'];

async function defaultedCopy(kube: UpgradeKube, object: Json): Promise<Json> {
  const copy = { ...object, metadata: { ...object.metadata, name: `${object.metadata.name}-netplugctl-defaults`.slice(0, 63) } };
  try {
    const created = await kube.request('POST', `${await kube.pathOf({ ...refOf(object), name: undefined })}?dryRun=All`, copy);
    return {
      ...created,
      metadata: { ...created.metadata, annotations: { ...object.metadata.annotations, ...created.metadata?.annotations } },
    };
  } catch {
    return object;
  }
}

/**
 * The leaves of a managedFields set (fieldsV1) that `desired` does not have, at the shallowest
 * level missing: `.spec.template.spec.volumes[name=legacy-status]`.
 */
function droppedPaths(fields: Json, desired: unknown, path: string): string[] {
  const out: string[] = [];
  for (const [key, sub] of Object.entries(fields)) {
    if (key === '.') continue;
    const kind = key.slice(0, 2);
    const rest = key.slice(2);
    if (kind === 'f:') {
      const child = isObject(desired) ? desired[rest] : undefined;
      const keyed = Object.keys(sub as Json).filter((k) => k.startsWith('k:'));
      // A whole list gone: name its items (`initContainers[name=upgrade-ipam]`).
      if (child === undefined && keyed.length)
        out.push(...droppedPaths(Object.fromEntries(keyed.map((k) => [k, {}])), [], `${path}.${rest}`));
      else if (child === undefined) out.push(`${path}.${rest}`);
      else out.push(...droppedPaths(sub as Json, child, `${path}.${rest}`));
    } else if (kind === 'k:') {
      const keyFields = JSON.parse(rest) as Json;
      const item = Array.isArray(desired)
        ? desired.find((element) => isObject(element) && Object.entries(keyFields).every(([k, v]) => element[k] === v))
        : undefined;
      const label = `${path}[${Object.entries(keyFields)
        .map(([k, v]) => `${k}=${v}`)
        .join(',')}]`;
      if (item === undefined) out.push(label);
      else out.push(...droppedPaths(sub as Json, item, label));
    } else if (kind === 'v:') {
      const value = JSON.parse(rest);
      if (!Array.isArray(desired) || !desired.some((element) => JSON.stringify(element) === JSON.stringify(value)))
        out.push(`${path}[${rest}]`);
    } else if (kind === 'i:') {
      const item = Array.isArray(desired) ? desired[Number(rest)] : undefined;
      if (item === undefined) out.push(`${path}[${rest}]`);
      else out.push(...droppedPaths(sub as Json, item, `${path}[${rest}]`));
    }
  }
  return out;
}

/** The managedFields with every legacy Update entry folded into netplugctl's Apply entry; undefined when there is none. */
function migratedManagedFields(managedFields: readonly Json[], now: Date): Json[] | undefined {
  const legacy = managedFields.filter(isLegacy);
  if (legacy.length === 0) return undefined;
  const kept = managedFields.filter((entry) => !isLegacy(entry));
  const ours = kept.find((entry) => entry.manager === FIELD_MANAGER && entry.operation === 'Apply');
  const fieldsV1 = legacy.reduce((union, entry) => unionFields(union, entry.fieldsV1 ?? {}), ours?.fieldsV1 ?? {});
  const entry = {
    manager: FIELD_MANAGER,
    operation: 'Apply',
    apiVersion: ours?.apiVersion ?? legacy[0]?.apiVersion,
    time: now.toISOString().replace(/\.\d+Z$/, 'Z'),
    fieldsType: 'FieldsV1',
    fieldsV1,
  };
  return ours ? kept.map((e) => (e === ours ? entry : e)) : [...kept, entry];
}

/**
 * Moves the legacy managers' fields of one object to netplugctl (a JSON patch that tests the
 * resourceVersion read, retried on a concurrent change). Returns whether it changed anything.
 */
export async function migrateFieldManagers(kube: UpgradeKube, ref: ObjectRef, attempts = 5): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    const live = await kube.getOrNothing(ref);
    const managedFields = migratedManagedFields(live?.metadata?.managedFields ?? [], new Date());
    if (!live || !managedFields) return false;
    try {
      await kube.jsonPatch(ref, [
        { op: 'test', path: '/metadata/resourceVersion', value: live.metadata.resourceVersion },
        { op: 'replace', path: '/metadata/managedFields', value: managedFields },
      ]);
      return true;
    } catch (err) {
      if (!isConflict(err) || attempt >= attempts)
        throw new Error(`moving the fields of ${describe(ref)} to ${FIELD_MANAGER}: ${(err as Error).message}`);
    }
  }
}

function unionFields(a: Json, b: Json): Json {
  const out: Json = { ...a };
  for (const [key, value] of Object.entries(b)) out[key] = isObject(out[key]) && isObject(value) ? unionFields(out[key], value) : value;
  return out;
}

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
