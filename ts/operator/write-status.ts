// The operator's reports: NetplugStatus objects `netplug` and `ippools` (what `kubectl get
// netplugstatuses` lists), and the Installation's status. Each is written only when it says
// something new, so a pass that changes nothing writes nothing.
import { type ComponentState, conditionsOf, type Problem, sameConditions } from './compute-conditions.ts';
import { API_VERSION, type Condition, type Installation, MANAGED_BY } from './installation.ts';
import { apply, applyStatus, mergePatch, type OperatorKube, operatorResource, readOrNothing } from './open-kube.ts';

export const STATUS_PLURAL = 'netplugstatuses';
export const INSTALLATION_PLURAL = 'installations';

export async function writeComponentStatus(
  kube: OperatorKube,
  name: string,
  state: ComponentState,
  problem: Problem | undefined,
): Promise<Condition[]> {
  const current = (await readOrNothing(() => kube.custom.getClusterCustomObject(operatorResource(STATUS_PLURAL, name)))) as
    | { status?: { conditions?: Condition[] } }
    | undefined;
  const conditions = conditionsOf(state, problem, current?.status?.conditions);
  if (current && sameConditions(current.status?.conditions, conditions)) return conditions;
  const header = { apiVersion: API_VERSION, kind: 'NetplugStatus', metadata: { name } };
  if (!current) await apply(kube, { ...header, metadata: { name, labels: { ...MANAGED_BY } }, spec: {} });
  await applyStatus(kube, STATUS_PLURAL, name, { ...header, status: { conditions } });
  return conditions;
}

export type InstallationStatus = NonNullable<Installation['status']>;

export async function writeInstallationStatus(kube: OperatorKube, installation: Installation, status: InstallationStatus): Promise<void> {
  const before = installation.status ?? {};
  const same =
    sameConditions(before.conditions, status.conditions) &&
    before.netplugVersion === status.netplugVersion &&
    before.mtu === status.mtu &&
    JSON.stringify(before.computed) === JSON.stringify(status.computed);
  if (same) return;
  await mergePatch(kube, INSTALLATION_PLURAL, installation.metadata.name, { status }, true);
}
