// The operator's two flow-log kinds (operator.projectnet.org/v1, deploy/operator-crds/): a
// FlowLogAggregator "default" installs netplug-flows and turns netplug-node's flow logs on; a
// FlowViewer "default" installs netplug-flow-viewer, which shows them (reconcile-viewer.ts).
// The API server accepts no other name (the CRDs' validation rule). Their specs as the operator
// reads them, the check of an aggregator's spec with netplug-flows' own settings parser, and
// their status, written only when it says something new.
import { flowsSettings } from '../flows/settings.ts';
import { SettingsError } from '../runtime/settings.ts';
import { sameConditions } from './compute-conditions.ts';
import type { Condition } from './installation.ts';
import { mergePatch, type OperatorKube } from './open-kube.ts';

export const AGGREGATOR_PLURAL = 'flowlogaggregators';
export const VIEWER_PLURAL = 'flowviewers';
/** The only name either kind takes. */
export const FLOWS_RESOURCE = 'default';
/** netplug-node's NETPLUG_FLOW_LOGS_INTERVAL when spec.flushInterval is unset (seconds). */
export const DEFAULT_FLUSH_INTERVAL = 15;

export interface FlowLogAggregatorSpec {
  /** NETPLUG_FLOWS_RETENTION: a duration such as 2h. */
  retention?: string;
  /** NETPLUG_FLOWS_MAX_BYTES: bytes, or a quantity such as 64Mi. */
  maxBytes?: string | number;
  /** netplug-node's NETPLUG_FLOW_LOGS_INTERVAL, in seconds. */
  flushInterval?: number;
}

interface FlowsStatus {
  observedGeneration?: number;
  conditions?: Condition[];
}

interface FlowsResource<Spec> {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; generation?: number; resourceVersion?: string; [k: string]: unknown };
  spec?: Spec;
  status?: FlowsStatus;
}

export type FlowLogAggregator = FlowsResource<FlowLogAggregatorSpec>;
export type FlowViewer = FlowsResource<Record<string, never>>;

/**
 * What of the spec netplug-flows cannot use, as netplug-flows' settings would refuse it, naming
 * the field and its value (`spec.retention "0s" must be at least 1 s`); none: [].
 */
export function aggregatorProblems(spec: FlowLogAggregatorSpec): string[] {
  const problems: string[] = [];
  const check = (field: keyof FlowLogAggregatorSpec, variable: string) => {
    const value = spec[field];
    if (value === undefined) return;
    try {
      flowsSettings({ [variable]: String(value) });
    } catch (err) {
      if (!(err instanceof SettingsError)) throw err;
      problems.push(err.message.replace(variable, `spec.${field}`));
    }
  };
  check('retention', 'NETPLUG_FLOWS_RETENTION');
  check('maxBytes', 'NETPLUG_FLOWS_MAX_BYTES');
  return problems;
}

/**
 * netplug-node's flow logs as the Installation's reconcile renders them: on with `aggregator`
 * once netplug-flows' Deployment exists (`flowsRunning`), its Service applied before it.
 */
export function nodeFlowLogs(aggregator: FlowLogAggregator | undefined, flowsRunning: boolean): { intervalSeconds: number } | undefined {
  if (!aggregator || !flowsRunning) return undefined;
  return { intervalSeconds: aggregator.spec?.flushInterval ?? DEFAULT_FLUSH_INTERVAL };
}

/** Writes the status of `object` (of `plural`) unless the cached one says the same. */
export async function writeFlowsStatus(
  kube: OperatorKube,
  plural: string,
  object: FlowsResource<unknown>,
  status: { observedGeneration?: number | undefined; conditions: Condition[] },
): Promise<void> {
  const before = object.status ?? {};
  if (before.observedGeneration === status.observedGeneration && sameConditions(before.conditions, status.conditions)) return;
  await mergePatch(kube, plural, object.metadata.name, { status }, true);
}
