// The operator's reports: NetplugStatus objects `netplug` and `ippools` (what `kubectl get
// netplugstatuses` lists), and the Installation's status. Each is written only when it says
// something new (compared with what the cache holds), so a pass that changes nothing writes
// nothing; and what is written only to status never triggers a pass of its own (the controller
// ignores status-only changes).
import { sameContent } from '../runtime/object-changes.ts';
import { type ComponentState, conditionsOf, type Problem, sameConditions } from './compute-conditions.ts';
import { API_VERSION, type Installation, type InstallationStatus, MANAGED_BY, type NetplugStatus } from './installation.ts';
import { apply, applyStatus, mergePatch, type OperatorKube } from './open-kube.ts';

const STATUS_PLURAL = 'netplugstatuses';
export const INSTALLATION_PLURAL = 'installations';

/**
 * Writes NetplugStatus `name`'s conditions for `state` and `problem`, computed from the
 * Installation's `generation`; `current` is the object as the cache holds it.
 */
export async function writeComponentStatus(
  kube: OperatorKube,
  name: string,
  current: NetplugStatus | undefined,
  report: { state: ComponentState; problem: Problem | undefined; generation: number | undefined },
): Promise<void> {
  const conditions = conditionsOf(report.state, report.problem, current?.status?.conditions, new Date(), report.generation);
  if (current && sameConditions(current.status?.conditions, conditions)) return;
  const header = { apiVersion: API_VERSION, kind: 'NetplugStatus', metadata: { name } };
  if (!current) await apply(kube, { ...header, metadata: { name, labels: { ...MANAGED_BY } }, spec: {} });
  await applyStatus(kube, STATUS_PLURAL, name, { ...header, status: { conditions } });
}

/** Writes the Installation's status unless the cached one says the same. */
export async function writeInstallationStatus(kube: OperatorKube, installation: Installation, status: InstallationStatus): Promise<void> {
  const before = installation.status ?? {};
  const same =
    before.observedGeneration === status.observedGeneration &&
    sameConditions(before.conditions, status.conditions) &&
    before.netplugVersion === status.netplugVersion &&
    before.mtu === status.mtu &&
    sameContent(before.computed, status.computed);
  if (same) return;
  await mergePatch(kube, INSTALLATION_PLURAL, installation.metadata.name, { status }, true);
}
