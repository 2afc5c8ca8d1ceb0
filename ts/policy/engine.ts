// The policy compiler of one node, kept incrementally: the agent feeds it what it watches
// (endpoints of every node, profiles, network sets, policies, tiers) and, after each batch of
// changes, asks `flush()` what to write. When only memberships changed (a pod's address or labels,
// a pod added or removed elsewhere), that is a batch of set and map element changes; when chains
// changed (a policy, a local endpoint), the agent gives `part()` to the composer, whose writer
// writes the difference. The engine holds the whole desired part, so a restart or a failed write
// is repaired by writing `part()` again.
//
// Only what a local endpoint needs is programmed: policies selecting one (with the sets their
// rules use) and the profiles local endpoints name.
import type { Chain, ElementChanges, TablePart } from '../nft/model.ts';
import type { NetworkPolicyResource, NetworkSetResource, ProfileResource, TierResource } from '../model/policy.ts';
import { DEFAULT_TIER } from '../model/policy.ts';
import type { Family } from './addresses.ts';
import { AddressedEntities, type AddressedEntity } from './addressed-entities.ts';
import { fixedChains } from './chains.ts';
import { FlowDecisions, type MarkedRule } from './flow-decisions.ts';
import type { EndpointInput, HostEndpointInput } from './endpoints.ts';
import { DEFAULT_FAILSAFE, parseFailsafePorts, type FailsafePort } from './host-chains.ts';
import { LocalEndpoints } from './local-endpoints.ts';
import { DEFAULT_DENY_COUNTERS, MAPS } from './names.ts';
import { byTier, DEFAULT_TIER_INFO, missingTier, tierInfo, type TierInfo } from './order.ts';
import { policyKey, policyProgram, profileProgram, type Direction, type PolicyProgram, type ProgramIssue } from './program.ts';
import { Programs, textOf, type PolicyIssue } from './programs.ts';
import { SelectorIndex } from './selector-index.ts';
import { SetRegistry } from './set-registry.ts';

export type { PolicyIssue } from './programs.ts';
export type { AddressedEntity } from './addressed-entities.ts';

export interface PolicyEngineOptions {
  /** The node whose endpoints (with an interface) are programmed. */
  nodeName: string;
  /**
   * The address families rules are made for. By default IPv4, and IPv6 too from the first IPv6
   * address of any endpoint, host endpoint or network set on: in a cluster without IPv6 addresses
   * a rule naming peers by selector would only repeat itself for sets that stay empty.
   */
  families?: readonly Family[];
  /** The host-side interface prefix of workloads (default `cali`): any such interface not dispatched is dropped. */
  interfacePrefix?: string;
  /** NFLOG group of Log rules (default 20). */
  logGroup?: number;
  /** Packets per second a Log rule logs at most (default 10). */
  logPerSecond?: number;
  /** Flow logs: the NFLOG group every deciding rule also logs new flows to (flow-prefix.ts); off when absent. */
  flowLogGroup?: number;
  /** The ports host endpoints' policies never close (default DEFAULT_FAILSAFE, with the kubelet's). */
  failsafe?: { inbound: readonly FailsafePort[]; outbound: readonly FailsafePort[] };
}

/** What changed since the last flush. */
export interface PolicyUpdate {
  /** Chains, sets or counters came, went or changed: write `part()` (through the composer). */
  structural: boolean;
  /** Otherwise the element changes to write in one batch (`NftTable.updateElements`); empty when nothing changed. */
  elements: ElementChanges;
}

export class PolicyEngine {
  readonly #options: Required<Omit<PolicyEngineOptions, 'flowLogGroup'>> & Pick<PolicyEngineOptions, 'flowLogGroup'>;
  /** Every endpoint and network set, for the sets of rule selectors. */
  readonly #index: SelectorIndex;
  readonly #sets: SetRegistry;
  readonly #local: LocalEndpoints;
  readonly #entities: AddressedEntities;
  readonly #programs: Programs;
  readonly #tiers = new Map<string, TierInfo>();
  /** Families are added as addresses of them are seen (no `families` option). */
  readonly #autoFamilies: boolean;
  #structural = true;
  /** Counts changes: what is derived from the inputs (flow-lookup.ts) is made again when it moved. */
  #generation = 0;
  /** The chains every part has, built once: the same objects each time, which the table writer skips. */
  #fixedChains: Chain[] | undefined;
  #part: TablePart | undefined;
  /** With flow logs on: the numbers of the rules that allow, in connections' marks. */
  #flowDecisions: FlowDecisions | undefined;

  constructor(options: PolicyEngineOptions) {
    this.#autoFamilies = options.families === undefined;
    this.#options = {
      families: [4],
      interfacePrefix: 'cali',
      logGroup: 20,
      logPerSecond: 10,
      failsafe: { inbound: parseFailsafePorts(DEFAULT_FAILSAFE.inbound), outbound: parseFailsafePorts(DEFAULT_FAILSAFE.outbound) },
      ...options,
    };
    this.#index = new SelectorIndex((selector, entity, added) => {
      if (this.#entities.applies(entity)) this.#sets.membershipChanged(selector, entity, added);
    });
    this.#sets = new SetRegistry(
      this.#index,
      (entity) => this.#entities.contributionOf(entity),
      () => this.#changedStructure(),
    );
    const { families, logGroup, logPerSecond, flowLogGroup } = this.#options;
    if (flowLogGroup !== undefined) this.#flowDecisions = new FlowDecisions();
    const flowLogs = flowLogGroup !== undefined ? { flowLogGroup, flowDecisions: this.#flowDecisions } : {};
    this.#programs = new Programs(this.#sets, { families, logGroup, logPerSecond, ...flowLogs }, () => this.#changedStructure());
    this.#local = new LocalEndpoints({
      program: (policy) => this.#programs.policies.get(policy)?.program,
      profile: (name) => this.#programs.profiles.get(name)?.program,
      tier: (name) => this.#tierOf(name),
      selectionChanged: (policy) => this.#programs.need(this.#programs.policies.get(policy), this.#local.selection(policy).size > 0),
      profileNeeded: (name, needed) => this.#programs.need(this.#programs.profiles.get(name), needed),
      structureChanged: () => this.#changedStructure(),
      interfacePrefix: this.#options.interfacePrefix,
      failsafe: this.#options.failsafe,
      ...(flowLogGroup !== undefined ? { flowLogGroup } : {}),
    });
    this.#entities = new AddressedEntities({
      nodeName: this.#options.nodeName,
      index: this.#index,
      sets: this.#sets,
      local: this.#local,
      profileLabels: (profile) => this.#programs.profiles.get(profile)?.labels,
      changed: () => this.#changed(),
      sawFamily: (family) => this.#sawFamily(family),
    });
  }

  /** An address of `family` entered: with automatic families, rules are made for it from now on (never removed). */
  #sawFamily(family: Family): void {
    if (!this.#autoFamilies || this.#options.families.includes(family)) return;
    this.#options.families = [...this.#options.families, family].sort();
    this.#programs.setFamilies(this.#options.families);
  }

  // ---- Inputs ----

  /** Adds or changes an endpoint (of any node; those of this node with an interface are programmed). */
  upsertEndpoint(input: EndpointInput): void {
    this.#entities.upsertEndpoint(input);
  }

  removeEndpoint(key: string): void {
    this.#entities.removeEndpoint(key);
  }

  /**
   * Adds or changes a host endpoint (of any node: those of this node with an interface are
   * programmed; every one's expected addresses are in the sets of selectors matching it).
   */
  upsertHostEndpoint(input: HostEndpointInput): void {
    this.#entities.upsertHostEndpoint(input);
  }

  removeHostEndpoint(name: string): void {
    this.#entities.removeHostEndpoint(name);
  }

  /** Adds or changes a profile: its labels (given to the endpoints naming it) and its rules. */
  upsertProfile(profile: ProfileResource): PolicyIssue[] {
    const name = profile.metadata.name;
    const issues: ProgramIssue[] = [];
    const program = profileProgram(profile, issues);
    const labels = profile.spec.labelsToApply ?? {};
    const record = { program, issues, labels };
    const { before, changed } = this.#programs.set(this.#programs.profiles, name, record);
    if (!before || textOf(before.labels) !== textOf(labels)) this.#entities.relabel(name);
    if (changed) {
      this.#programs.need(record, this.#local.profileUsed(name));
      this.#local.profileChanged(name);
    }
    this.#changed();
    return issues.map((issue) => ({ policy: program.key, ...issue }));
  }

  removeProfile(name: string): void {
    if (!this.#programs.remove(this.#programs.profiles, name)) return;
    this.#entities.relabel(name);
    this.#local.profileChanged(name);
    this.#changed();
  }

  upsertNetworkSet(resource: NetworkSetResource): void {
    this.#entities.upsertNetworkSet(resource);
  }

  removeNetworkSet(kind: NetworkSetResource['kind'], name: string, namespace?: string): void {
    this.#entities.removeNetworkSet(kind, name, namespace);
  }

  /** Adds or changes a policy (checked, with defaults); returns what of it cannot be programmed. */
  upsertPolicy(policy: NetworkPolicyResource): PolicyIssue[] {
    const issues: ProgramIssue[] = [];
    const namespace = policy.kind === 'NetworkPolicy' ? (policy.metadata.namespace ?? 'default') : undefined;
    const key = policyKey(policy.kind, policy.metadata.name, namespace);
    let program: PolicyProgram | undefined;
    try {
      program = policyProgram(policy, issues);
    } catch (err) {
      issues.push({ field: 'spec', message: `not programmed: ${(err as Error).message}` });
    }
    const record = { program, issues };
    const { before, changed } = this.#programs.set(this.#programs.policies, key, record);
    if (changed) this.#local.setPolicy(key, before?.program, program);
    this.#programs.need(record, this.#local.selection(key).size > 0);
    this.#changed();
    return issues.map((issue) => ({ policy: key, ...issue }));
  }

  removePolicy(kind: NetworkPolicyResource['kind'], name: string, namespace?: string): void {
    const key = policyKey(kind, name, kind === 'NetworkPolicy' ? (namespace ?? 'default') : undefined);
    const record = this.#programs.policies.get(key);
    if (!record) return;
    this.#local.setPolicy(key, record.program, undefined);
    this.#programs.remove(this.#programs.policies, key);
    this.#changed();
  }

  upsertTier(tier: TierResource): void {
    this.#tiers.set(tier.metadata.name, tierInfo(tier));
    this.#local.dirtyAll();
    this.#changed();
  }

  removeTier(name: string): void {
    this.#tiers.delete(name);
    this.#local.dirtyAll();
    this.#changed();
  }

  // ---- Outputs ----

  /** What to write for the changes since the last flush (see PolicyUpdate). */
  flush(): PolicyUpdate {
    this.#local.rebuild();
    const structural = this.#structural;
    this.#structural = false;
    const sets = this.#sets.journal.take();
    const maps = this.#local.dispatch.take().map((c) => ({ name: c.name, add: c.add, delete: c.delete.map((e) => e.key) }));
    if (structural) return { structural: true, elements: {} };
    return { structural: false, elements: { ...(sets.length > 0 ? { sets } : {}), ...(maps.length > 0 ? { maps } : {}) } };
  }

  /** The whole policy part as it should be now (pending endpoint rebuilds included). */
  part(): TablePart {
    this.#local.rebuild();
    if (this.#part) return this.#part;
    const programmed = this.#programs.chains();
    const endpoints = this.#local.chains((name) => programmed.names.has(name));
    this.#part = {
      chains: [...this.#fixed(), ...endpoints.chains, ...programmed.chains],
      sets: this.#sets.nftSets(),
      maps: [
        { name: MAPS.from, type: 'ifname', elements: endpoints.from },
        { name: MAPS.to, type: 'ifname', elements: endpoints.to },
      ],
      counters: [...Object.values(DEFAULT_DENY_COUNTERS), ...programmed.counters],
    };
    return this.#part;
  }

  #fixed(): Chain[] {
    this.#fixedChains ??= fixedChains(this.#options.interfacePrefix);
    return this.#fixedChains;
  }

  /** What of each policy and profile cannot be programmed. */
  issues(): PolicyIssue[] {
    return this.#programs.issues();
  }

  /**
   * The host interface of a local endpoint whose chains and dispatch entries are in `part()` (after
   * a flush): once the part (or element batch) holding it is written, its status file may be.
   */
  programmedInterface(key: string): string | undefined {
    return this.#local.programmed(key);
  }

  /** The policies of a local endpoint per direction, in evaluation order (their keys). */
  endpointPolicies(key: string): Record<'ingress' | 'egress', string[]> {
    const programs = [...this.#local.selectedBy(key)].flatMap((k) => this.#programs.policies.get(k)?.program ?? []);
    const ordered = (direction: 'ingress' | 'egress') =>
      byTier(
        programs.filter((p) => p[direction]),
        (name) => this.#tierOf(name),
      ).flatMap((t) => t.programs.map((p) => p.key));
    return { ingress: ordered('ingress'), egress: ordered('egress') };
  }

  /** The policy or profile whose Deny rules count into `counter`, if any. */
  policyOfCounter(counter: string): string | undefined {
    return this.#programs.ownerOfCounter(counter);
  }

  /** The programmed policies and profiles by the name of their deny counter (what /metrics names a count by). */
  denyCounters(): ReadonlyMap<string, PolicyProgram> {
    return this.#programs.denyCounters();
  }

  /** Moves with every change of the inputs. */
  get generation(): number {
    return this.#generation;
  }

  /** Every endpoint, host endpoint and network set with its addresses: what flow logs name an address by. */
  addressedEntities(): Generator<AddressedEntity> {
    return this.#entities.addressed();
  }

  /** Every policy and profile the engine holds (their keys and tiers). */
  *programKeys(): Generator<{ key: string; tier?: string }> {
    for (const { program } of this.#programs.policies.values()) if (program) yield { key: program.key, tier: program.tier };
    for (const { program } of this.#programs.profiles.values()) if (program) yield { key: program.key };
  }

  /** With flow logs on: the rule a connection mark's number names in `direction` (flow-decisions.ts). */
  flowDecision(direction: Direction, number: number): MarkedRule | undefined {
    return this.#flowDecisions?.decision(direction, number);
  }

  /** Sizes, for metrics and the cost measurements. */
  stats() {
    const programmed = this.#programs.programmed();
    const localHosts = this.#entities.localHostEndpointCount;
    return {
      endpoints: this.#entities.endpointCount,
      localEndpoints: this.#local.size - localHosts,
      localHostEndpoints: localHosts,
      policies: this.#programs.policies.size,
      activePolicies: programmed.policies,
      policyRules: programmed.rules,
      sets: this.#sets.size,
      selectorEvaluations: this.#index.evaluations,
    };
  }

  // ---- Internals ----

  #changed(): void {
    this.#part = undefined;
    this.#generation++;
  }

  #changedStructure(): void {
    this.#structural = true;
    this.#part = undefined;
    this.#generation++;
  }

  #tierOf(name: string): TierInfo {
    return this.#tiers.get(name) ?? (name === DEFAULT_TIER ? DEFAULT_TIER_INFO : missingTier(name));
  }
}
