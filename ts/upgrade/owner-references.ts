// The owner-reference steps, done by `netplugctl migrate owner-references`'s functions: the plan
// lists what they would strip, apply strips before and restores after.
import {
  describeDependent,
  describeOwner,
  findOwnerReferences,
  restoreOwnerReferences,
  stripOwnerReferences,
} from '../migrate/owner-references.ts';
import type { UpgradeKube } from './kube.ts';

/** `ConfigMap default/x → IPPool p (crd.projectnet.org/v1)`, for references on objects now and recorded ones awaiting a restore. */
export async function findOwnerReferenceDescriptions(kube: UpgradeKube): Promise<string[]> {
  const report = await findOwnerReferences(kube.config);
  return [
    ...report.references.map((r) => `${describeDependent(r.dependent)} → ${describeOwner(r.owner)}`),
    ...report.recorded
      .filter((r) => !report.references.some((f) => f.dependent.uid === r.dependent.uid && f.owner.uid === r.owner.uid))
      .map((r) => `${describeDependent(r.dependent)} → ${describeOwner(r.owner)} (recorded, awaiting restore)`),
  ];
}

/** Strips every reference (recorded first); a summary, or an error when any could not be taken off. */
export async function stripReferences(kube: UpgradeKube): Promise<string> {
  const result = await stripOwnerReferences(kube.config);
  if (result.failed.length)
    throw new Error(
      `${result.failed.length} owner reference(s) could not be removed (recorded; run apply again): ${result.failed.map((f) => `${describeDependent(f.reference.dependent)}: ${f.error}`).join('; ')}`,
    );
  return `${result.stripped.length} stripped, ${result.recorded.length} recorded`;
}

/** Restores every recorded reference; an error when an owner is gone or a patch failed (the record keeps them). */
export async function restoreReferences(kube: UpgradeKube): Promise<string> {
  const result = await restoreOwnerReferences(kube.config);
  const problems = [
    ...result.missingOwners.map((m) => `${describeDependent(m.entry.dependent)}: ${m.reason}`),
    ...result.failed.map((f) => `${describeDependent(f.entry.dependent)}: ${f.error}`),
  ];
  if (problems.length) throw new Error(`${problems.length} owner reference(s) not restored (kept in the record): ${problems.join('; ')}`);
  return `${result.restored.length} restored`;
}
