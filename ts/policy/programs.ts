// The policies and profiles the engine knows, each with its program, what of it could not be
// programmed, and, while it is programmed (a local endpoint needs it), its chains and the sets
// their rules use. A changed program rebuilds its chains before the old ones' sets are released,
// so sets both use are kept, not recreated.
import type { Chain } from '../nft/model.ts';
import type { Family } from './addresses.ts';
import type { Labels } from '../selectors/syntax.ts';
import { denyCounterName, policyChainName } from './names.ts';
import { fitted } from './fitted.ts';
import { DIRECTIONS, type PolicyProgram, type ProgramIssue } from './program.ts';
import { policyRules, type RuleOptions, type SetDescriptor } from './rules.ts';
import type { SetRegistry } from './set-registry.ts';

/** A policy (or profile) part of which cannot be programmed: what, and why. */
export interface PolicyIssue extends ProgramIssue {
  /** `NetworkPolicy/<ns>/<name>`, `GlobalNetworkPolicy/<name>`, `Profile/<name>`. */
  policy: string;
}

export interface ProgramRecord {
  program: PolicyProgram | undefined;
  issues: ProgramIssue[];
  /** Profiles: their labels for the endpoints naming them. */
  labels?: Labels;
  /** `counter`: the named counter its Deny rules count into; none without Deny rules. */
  active?: { chains: Chain[]; sets: string[]; counter?: string };
}

/** A value's JSON for comparing two states (addresses are BigInts, which JSON has no form for). */
export const textOf = (value: unknown): string => JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? v.toString() : v));

/** How many policies and profiles no local endpoint needs stay programmed. */
const IDLE_KEPT = 64;

export class Programs {
  readonly policies = new Map<string, ProgramRecord>();
  /** By profile name (their program's key is `Profile/<name>`). */
  readonly profiles = new Map<string, ProgramRecord>();
  readonly #sets: SetRegistry;
  #ruleOptions: RuleOptions;
  readonly #structureChanged: () => void;
  /** chains()'s answer, kept until a program is built or released (a part at thousands of policies otherwise walks them all). */
  #programmed: { chains: Chain[]; counters: string[]; names: ReadonlySet<string> } | undefined;
  /** Programmed records no local endpoint needs, oldest first. */
  readonly #idle = new Set<ProgramRecord>();

  constructor(sets: SetRegistry, ruleOptions: RuleOptions, structureChanged: () => void) {
    this.#sets = sets;
    this.#ruleOptions = ruleOptions;
    this.#structureChanged = structureChanged;
  }

  /** Sets a record; a programmed one gets the new program's chains. Says whether the program changed. */
  set(records: Map<string, ProgramRecord>, key: string, record: ProgramRecord): { before: ProgramRecord | undefined; changed: boolean } {
    const before = records.get(key);
    if (before?.active) record.active = before.active;
    if (before && this.#idle.delete(before)) this.#idle.add(record);
    records.set(key, record);
    const changed = !before?.program || !record.program || textOf(before.program) !== textOf(record.program);
    // An idle program that changed is not built again for nobody.
    if (changed && this.#idle.has(record)) this.#drop(record);
    else if (changed && record.active && record.program) {
      const old = record.active;
      record.active = this.#build(record.program);
      this.#release(old);
    }
    return { before, changed };
  }

  /** Rules are made for `families` from now on: every programmed record is built again. */
  setFamilies(families: readonly Family[]): void {
    this.#ruleOptions = { ...this.#ruleOptions, families };
    for (const record of [...this.policies.values(), ...this.profiles.values()]) {
      if (!record.active || !record.program) continue;
      // Built before the old chains' sets are released, so that sets both use are kept.
      const old = record.active;
      record.active = this.#build(record.program);
      this.#release(old);
    }
  }

  remove(records: Map<string, ProgramRecord>, key: string): ProgramRecord | undefined {
    const record = records.get(key);
    if (!record) return undefined;
    records.delete(key);
    this.#idle.delete(record);
    if (record.active) this.#release(record.active);
    return record;
  }

  /**
   * Programs the record while `needed`. One no longer needed stays programmed, idle, among the
   * IDLE_KEPT most recent (its chains unreferenced): a pod coming back, or the next of a
   * Deployment's pods, then writes its own chains only, not its policies' again.
   */
  need(record: ProgramRecord | undefined, needed: boolean): void {
    if (!record) return;
    if (needed && record.program) {
      if (this.#idle.delete(record)) return;
      if (!record.active) record.active = this.#build(record.program);
      return;
    }
    if (!record.active) return;
    if (!record.program) {
      this.#drop(record);
      return;
    }
    if (this.#idle.has(record)) return;
    this.#idle.add(record);
    for (const oldest of this.#idle) {
      if (this.#idle.size <= IDLE_KEPT) break;
      this.#drop(oldest);
    }
  }

  #drop(record: ProgramRecord): void {
    this.#idle.delete(record);
    if (!record.active) return;
    this.#release(record.active);
    delete record.active;
  }

  /** The programmed chains (also by name) and their deny counters. */
  chains(): { chains: Chain[]; counters: string[]; names: ReadonlySet<string> } {
    this.#programmed ??= this.#collect();
    return this.#programmed;
  }

  #collect(): { chains: Chain[]; counters: string[]; names: ReadonlySet<string> } {
    const chains: Chain[] = [];
    const counters: string[] = [];
    for (const record of [...this.policies.values(), ...this.profiles.values()]) {
      if (!record.active || !record.program) continue;
      for (const chain of record.active.chains) chains.push(chain);
      if (record.active.counter) counters.push(record.active.counter);
    }
    return { chains, counters: counters.sort(), names: new Set(chains.map((c) => c.name)) };
  }

  issues(): PolicyIssue[] {
    const out: PolicyIssue[] = [];
    for (const [key, record] of this.policies) out.push(...record.issues.map((issue) => ({ policy: key, ...issue })));
    for (const [name, record] of this.profiles) out.push(...record.issues.map((issue) => ({ policy: `Profile/${name}`, ...issue })));
    return out;
  }

  /** The policy or profile whose Deny rules count into `counter`, if any. */
  ownerOfCounter(counter: string): string | undefined {
    for (const record of [...this.policies.values(), ...this.profiles.values()])
      if (record.program && denyCounterName(record.program.key) === counter) return record.program.key;
    return undefined;
  }

  /** The programmed policies and profiles, by the name of the counter their Deny rules count into. */
  denyCounters(): Map<string, PolicyProgram> {
    const out = new Map<string, PolicyProgram>();
    for (const record of [...this.policies.values(), ...this.profiles.values()])
      if (record.active?.counter && record.program) out.set(record.active.counter, record.program);
    return out;
  }

  /** Policies programmed, and the rules of their chains. */
  programmed(): { policies: number; rules: number } {
    let rules = 0;
    let policies = 0;
    for (const record of this.policies.values()) {
      if (!record.active || this.#idle.has(record)) continue;
      policies++;
      for (const chain of record.active.chains) rules += chain.rules?.length ?? 0;
    }
    return { policies, rules };
  }

  #build(program: PolicyProgram): { chains: Chain[]; sets: string[]; counter?: string } {
    const sets: string[] = [];
    const use = (set: SetDescriptor) => {
      const name = this.#sets.use(set);
      sets.push(name);
      return name;
    };
    const chains: Chain[] = [];
    for (const direction of DIRECTIONS) {
      if (!program[direction]) continue;
      chains.push({ name: policyChainName(program.key, direction), rules: policyRules(program, direction, this.#ruleOptions, use) });
    }
    this.#programmed = undefined;
    this.#structureChanged();
    // A counter only for a program that can deny: most (every Kubernetes NetworkPolicy) cannot, and
    // each counter is one more object in every whole write of the table.
    const denies = DIRECTIONS.some((direction) => program[direction]?.some((r) => r.action === 'Deny'));
    return { chains: fitted(chains), sets: fitted(sets), ...(denies ? { counter: denyCounterName(program.key) } : {}) };
  }

  #release(active: { sets: string[] }): void {
    for (const name of active.sets) this.#sets.release(name);
    this.#programmed = undefined;
    this.#structureChanged();
  }
}
