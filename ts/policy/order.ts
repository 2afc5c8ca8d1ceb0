// The order policies are evaluated in: tiers by their order (lower first, ties by name), inside
// a tier by the policy's order (absent: after every policy with one), ties by name
// (`<namespace>/<name>` for namespaced policies). A tier's default action is what happens when none
// of its policies for an endpoint decided: Deny (drop), or Pass (on to the next tier).
import { DEFAULT_TIER, DEFAULT_TIER_ORDER, type TierResource } from '../model/policy.ts';
import type { PolicyProgram } from './program.ts';

export interface TierInfo {
  name: string;
  order: number;
  passes: boolean;
  /** Named by policies but not defined: ordered last, denying by default (a missing tier opens nothing). */
  missing?: true;
}

export const DEFAULT_TIER_INFO: TierInfo = { name: DEFAULT_TIER, order: DEFAULT_TIER_ORDER, passes: false };

export function tierInfo(resource: TierResource): TierInfo {
  if (resource.metadata.name === DEFAULT_TIER) return DEFAULT_TIER_INFO;
  return {
    name: resource.metadata.name,
    order: resource.spec.order ?? Number.POSITIVE_INFINITY,
    passes: resource.spec.defaultAction === 'Pass',
  };
}

export const missingTier = (name: string): TierInfo => ({ name, order: Number.POSITIVE_INFINITY, passes: false, missing: true });

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function compareTiers(a: TierInfo, b: TierInfo): number {
  return a.order !== b.order ? (a.order < b.order ? -1 : 1) : byText(a.name, b.name);
}

/** Evaluation order of two policies, given where their tiers stand. */
function comparePolicies(a: PolicyProgram, b: PolicyProgram, tierOf: (name: string) => TierInfo): number {
  const tiers = compareTiers(tierOf(a.tier), tierOf(b.tier));
  if (tiers !== 0) return tiers;
  const [x, y] = [a.order ?? Number.POSITIVE_INFINITY, b.order ?? Number.POSITIVE_INFINITY];
  if (x !== y) return x < y ? -1 : 1;
  return byText(a.display, b.display) || byText(a.kind, b.kind);
}

/** The programs in evaluation order, grouped by tier (tiers in order). */
export function byTier(
  programs: readonly PolicyProgram[],
  tierOf: (name: string) => TierInfo,
): { tier: TierInfo; programs: PolicyProgram[] }[] {
  const sorted = [...programs].sort((a, b) => comparePolicies(a, b, tierOf));
  const out: { tier: TierInfo; programs: PolicyProgram[] }[] = [];
  for (const program of sorted) {
    const last = out.at(-1);
    if (last && last.tier.name === program.tier) last.programs.push(program);
    else out.push({ tier: tierOf(program.tier), programs: [program] });
  }
  return out;
}
