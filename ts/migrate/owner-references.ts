// Owner references to netplug's resources across an upgrade (the specification's "Owner
// references"): the functions `netplugctl migrate owner-references` and `netplugctl upgrade` call.
// A Kubernetes object owned by a netplug resource is garbage collected when that resource's UID
// changes (it is recreated: a datastore import, a pool the operator recreates, a restore from
// backup, a move to another API group). So: find them, strip them (recorded in the cluster first),
// upgrade, restore them with the owners' new UIDs.
import type * as k8s from '@kubernetes/client-node';

import { openApi } from './owner-references-api.ts';
import { findIn, type FoundReference, type Unsearched } from './owner-references-find.ts';
import { readRecord, type RecordedReference } from './owner-references-record.ts';
import { restoreIn, type RestoreResult } from './owner-references-restore.ts';
import { stripIn, type StripOptions, type StripResult } from './owner-references-strip.ts';

export {
  describeDependent,
  describeOwner,
  type FoundReference,
  type Unsearched,
} from './owner-references-find.ts';
export { RECORD_NAME, RECORD_NAMESPACE } from './owner-references-record.ts';
export type { RestoreResult } from './owner-references-restore.ts';
export type { StripOptions, StripResult } from './owner-references-strip.ts';

export interface FindReport {
  /** References to netplug resources on objects in the cluster now. */
  references: FoundReference[];
  /** Resources that could not be listed: references there are unknown. */
  unsearched: Unsearched[];
  /** References in the record (stripped, or recorded and not yet stripped) that await a restore. */
  recorded: RecordedReference[];
}

/** Every object holding an owner reference to a netplug resource, and what the record holds. Reads only. */
export async function findOwnerReferences(kube: k8s.KubeConfig): Promise<FindReport> {
  const api = openApi(kube);
  const [found, record] = await Promise.all([findIn(api), readRecord(api)]);
  return { ...found, recorded: [...record.entries.values()] };
}

/** Records every owner reference to a netplug resource (ConfigMap kube-system/netplug-owner-references), then takes it off its object. */
export function stripOwnerReferences(kube: k8s.KubeConfig, options: StripOptions = {}): Promise<StripResult> {
  return stripIn(openApi(kube), options);
}

/** Puts every recorded reference back with its owner's current UID, and clears it from the record. */
export function restoreOwnerReferences(kube: k8s.KubeConfig): Promise<RestoreResult> {
  return restoreIn(openApi(kube));
}
