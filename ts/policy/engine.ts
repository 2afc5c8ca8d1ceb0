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
import type { Chain, ElementChanges, MapElement, TablePart } from '../nft/model.ts';
import { matches } from '../selectors/evaluate.ts';
import type { Labels } from '../selectors/syntax.ts';
import type { NetworkPolicyResource, NetworkSetResource, ProfileResource, TierResource } from '../model/policy.ts';
import { DEFAULT_TIER } from '../model/policy.ts';
import { netInterval, type Family } from './addresses.ts';
import { dispatchElements, endpointChain, fixedChains, type EndpointPlan } from './chains.ts';
import { formatIp } from '../net/cidr.ts';
import { endpointLabels, networkSetKey, networkSetLabels, profilesOf, type EndpointInput } from './endpoints.ts';
import { denyCounterName, MAPS, policyChainName } from './names.ts';
import { byTier, DEFAULT_TIER_INFO, missingTier, tierInfo, type TierInfo } from './order.ts';
import { DIRECTIONS, policyKey, policyProgram, profileProgram, type PolicyProgram, type ProgramIssue } from './program.ts';
import { policyRules, type RuleOptions } from './rules.ts';
import { SelectorIndex } from './selector-index.ts';
import { SetRegistry, type Contribution } from './set-registry.ts';
import { ElementJournal } from './sets.ts';

export interface PolicyEngineOptions {
  /** The node whose endpoints (with an interface) are programmed. */
  nodeName: string;
  /** The address families the cluster's pods have (default both): sets and rules are made for these. */
  families?: readonly Family[];
  /** The host-side interface prefix of workloads (default `cali`): any such interface not dispatched is dropped. */
  interfacePrefix?: string;
  /** NFLOG group of Log rules (default 20). */
  logGroup?: number;
  /** Packets per second a Log rule logs at most (default 10). */
  logPerSecond?: number;
}

/** What changed since the last flush. */
export interface PolicyUpdate {
  /** Chains, sets or counters came, went or changed: write `part()` (through the composer). */
  structural: boolean;
  /** Otherwise the element changes to write in one batch (`NftTable.updateElements`); empty when nothing changed. */
  elements: ElementChanges;
}

/** A policy (or profile) part of which cannot be programmed: what, and why. */
export interface PolicyIssue extends ProgramIssue {
  /** `NetworkPolicy/<ns>/<name>`, `GlobalNetworkPolicy/<name>`, `Profile/<name>`. */
  policy: string;
}

interface EndpointRecord {
  input: EndpointInput;
  entity: string;
  labels: Labels;
  contribution: Contribution;
  local: boolean;
  /** Local endpoints: the policies selecting it. */
  selectedBy: Set<string>;
}

interface Active {
  chains: Chain[];
  sets: string[];
}

interface PolicyRecord {
  program: PolicyProgram | undefined;
  issues: ProgramIssue[];
  /** Local endpoints it selects. */
  selected: Set<string>;
  active?: Active;
}

interface ProfileRecord {
  name: string;
  program: PolicyProgram;
  labels: Labels;
  issues: ProgramIssue[];
  active?: Active;
}

const endpointEntity = (key: string) => `WorkloadEndpoint/${key}`;

/** A value's JSON for comparing two states (addresses are BigInts, which JSON has no form for). */
const textOf = (value: unknown): string => JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? v.toString() : v));

export class PolicyEngine {
  readonly #options: Required<PolicyEngineOptions>;
  readonly #ruleOptions: RuleOptions;
  readonly #index: SelectorIndex;
  readonly #sets: SetRegistry;
  readonly #endpoints = new Map<string, EndpointRecord>();
  readonly #local = new Set<string>();
  readonly #networkSets = new Map<string, { resource: NetworkSetResource; contribution: Contribution }>();
  readonly #policies = new Map<string, PolicyRecord>();
  readonly #profiles = new Map<string, ProfileRecord>();
  /** Profile name → the entities (endpoints, namespaced network sets) whose labels it gives. */
  readonly #profileUsers = new Map<string, Set<string>>();
  readonly #tiers = new Map<string, TierInfo>();
  /** Local endpoint key → its chains, as last built. */
  readonly #endpointChains = new Map<string, { ingress: Chain; egress: Chain; interfaceName: string }>();
  readonly #dirty = new Set<string>();
  /** Dispatch map changes since the last flush (additions hold map elements, deletions interface names). */
  readonly #dispatch = new ElementJournal<MapElement>();
  #structural = true;
  #part: TablePart | undefined;
  /** Entities whose set contributions are being replaced: membership events are not theirs to apply. */
  #muted: string | undefined;

  constructor(options: PolicyEngineOptions) {
    this.#options = { families: [4, 6], interfacePrefix: 'cali', logGroup: 20, logPerSecond: 10, ...options };
    this.#ruleOptions = { families: this.#options.families, logGroup: this.#options.logGroup, logPerSecond: this.#options.logPerSecond };
    this.#index = new SelectorIndex((selector, entity, added) => {
      if (entity !== this.#muted) this.#sets.membershipChanged(selector, entity, added);
    });
    this.#sets = new SetRegistry(
      this.#index,
      (entity) => this.#contributionOf(entity),
      () => this.#changedStructure(),
    );
  }

  // ---- Inputs ----

  /** Adds or changes an endpoint (of any node; those of this node with an interface are programmed). */
  upsertEndpoint(input: EndpointInput): void {
    const key = input.key;
    const before = this.#endpoints.get(key);
    const entity = endpointEntity(key);
    const labels = endpointLabels(input, (profile) => this.#profiles.get(profile)?.labels);
    const contribution: Contribution = {
      addresses: input.addresses.flatMap((text) => {
        const found = netInterval(text);
        return found && found.interval.start === found.interval.end ? [found] : [];
      }),
      ports: input.ports ?? [],
    };
    const local = input.node === this.#options.nodeName && input.interfaceName !== undefined;
    const record: EndpointRecord = { input, entity, labels, contribution, local, selectedBy: before?.selectedBy ?? new Set() };
    if (before) this.#unuseProfiles(entity, profilesOf(before.input));
    this.#useProfiles(entity, profilesOf(input));
    this.#setEntity(entity, labels, before?.contribution, contribution, () => this.#endpoints.set(key, record));
    if (before?.local && !local) this.#unlocal(key, record);
    if (local) {
      this.#local.add(key);
      if (!before?.local || JSON.stringify(before.input) !== JSON.stringify(input)) this.#dirty.add(key);
      this.#select(key);
    }
  }

  removeEndpoint(key: string): void {
    const record = this.#endpoints.get(key);
    if (!record) return;
    this.#index.removeEntity(record.entity);
    this.#unuseProfiles(record.entity, profilesOf(record.input));
    if (record.local) this.#unlocal(key, record);
    this.#endpoints.delete(key);
    this.#changed();
  }

  /** Adds or changes a profile: its labels (given to the endpoints naming it) and its rules. */
  upsertProfile(profile: ProfileResource): PolicyIssue[] {
    const name = profile.metadata.name;
    const issues: ProgramIssue[] = [];
    const program = profileProgram(profile, issues);
    const before = this.#profiles.get(name);
    const labels = profile.spec.labelsToApply ?? {};
    const record: ProfileRecord = { name, program, labels, issues, ...(before?.active ? { active: before.active } : {}) };
    this.#profiles.set(name, record);
    if (!before || JSON.stringify(before.labels) !== JSON.stringify(labels)) this.#relabel(name);
    if (!before || textOf(before.program) !== textOf(program)) {
      if (record.active) {
        const old = record.active;
        delete record.active;
        this.#activateProfile(record);
        this.#release(old);
      }
      this.#dirtyUsersOf(name);
    }
    this.#changed();
    return issues.map((issue) => ({ policy: program.key, ...issue }));
  }

  removeProfile(name: string): void {
    const record = this.#profiles.get(name);
    if (!record) return;
    this.#profiles.delete(name);
    if (record.active) this.#release(record.active);
    this.#relabel(name);
    this.#dirtyUsersOf(name);
    this.#changed();
  }

  upsertNetworkSet(resource: NetworkSetResource): void {
    const key = networkSetKey(resource);
    const before = this.#networkSets.get(key);
    const contribution: Contribution = { addresses: (resource.spec.nets ?? []).flatMap((text) => netInterval(text) ?? []), ports: [] };
    const profiles = this.#networkSetProfiles(resource);
    if (before) this.#unuseProfiles(key, this.#networkSetProfiles(before.resource));
    this.#useProfiles(key, profiles);
    const labels = this.#networkSetLabels(resource);
    this.#setEntity(key, labels, before?.contribution, contribution, () => this.#networkSets.set(key, { resource, contribution }));
    this.#changed();
  }

  removeNetworkSet(kind: NetworkSetResource['kind'], name: string, namespace?: string): void {
    const key = networkSetKey({ kind, apiVersion: '', metadata: { name, ...(namespace ? { namespace } : {}) }, spec: {} });
    const record = this.#networkSets.get(key);
    if (!record) return;
    this.#index.removeEntity(key);
    this.#unuseProfiles(key, this.#networkSetProfiles(record.resource));
    this.#networkSets.delete(key);
    this.#changed();
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
    const before = this.#policies.get(key);
    const record: PolicyRecord = { program, issues, selected: new Set(), ...(before?.active ? { active: before.active } : {}) };
    this.#policies.set(key, record);
    const placeChanged =
      !before?.program ||
      !program ||
      before.program.tier !== program.tier ||
      before.program.order !== program.order ||
      !before.program.ingress !== !program.ingress ||
      !before.program.egress !== !program.egress;
    for (const endpoint of this.#local) this.#selectOne(endpoint, key, record, before?.selected.has(endpoint) ?? false, placeChanged);
    if (record.active && before?.program && program && textOf(before.program) !== textOf(program)) {
      const old = record.active;
      delete record.active;
      this.#activate(record);
      this.#release(old);
    }
    this.#refreshActivation(record);
    this.#changed();
    return issues.map((issue) => ({ policy: key, ...issue }));
  }

  removePolicy(kind: NetworkPolicyResource['kind'], name: string, namespace?: string): void {
    const key = policyKey(kind, name, kind === 'NetworkPolicy' ? (namespace ?? 'default') : undefined);
    const record = this.#policies.get(key);
    if (!record) return;
    this.#policies.delete(key);
    for (const endpoint of record.selected) {
      this.#endpoints.get(endpoint)?.selectedBy.delete(key);
      this.#dirty.add(endpoint);
    }
    if (record.active) this.#release(record.active);
    this.#changed();
  }

  upsertTier(tier: TierResource): void {
    this.#tiers.set(tier.metadata.name, tierInfo(tier));
    this.#dirtyAllLocal();
  }

  removeTier(name: string): void {
    this.#tiers.delete(name);
    this.#dirtyAllLocal();
  }

  // ---- Outputs ----

  /** What to write for the changes since the last flush (see PolicyUpdate). */
  flush(): PolicyUpdate {
    for (const key of this.#dirty) this.#rebuildEndpoint(key);
    this.#dirty.clear();
    const structural = this.#structural;
    this.#structural = false;
    const sets = this.#sets.journal.take();
    const maps = this.#dispatch.take().map((c) => ({ name: c.name, add: c.add, delete: c.delete.map((e) => e.key) }));
    if (structural) return { structural: true, elements: {} };
    return { structural: false, elements: { ...(sets.length > 0 ? { sets } : {}), ...(maps.length > 0 ? { maps } : {}) } };
  }

  /** The whole policy part as it should be now (pending endpoint rebuilds included). */
  part(): TablePart {
    if (this.#dirty.size > 0) {
      for (const key of this.#dirty) this.#rebuildEndpoint(key);
      this.#dirty.clear();
    }
    if (this.#part) return this.#part;
    const chains: Chain[] = fixedChains(this.#options.interfacePrefix);
    const from: MapElement[] = [];
    const to: MapElement[] = [];
    for (const built of [...this.#endpointChains.values()].sort((a, b) => (a.interfaceName < b.interfaceName ? -1 : 1))) {
      chains.push(built.ingress, built.egress);
      const elements = dispatchElements(built.interfaceName);
      from.push(elements.from);
      to.push(elements.to);
    }
    const counters: string[] = [];
    for (const [key, record] of [...this.#policies, ...[...this.#profiles.values()].map((p) => [p.program.key, p] as const)]) {
      if (!record.active) continue;
      chains.push(...record.active.chains);
      counters.push(denyCounterName(key));
    }
    this.#part = {
      chains,
      sets: this.#sets.nftSets(),
      maps: [
        { name: MAPS.from, type: 'ifname', elements: from },
        { name: MAPS.to, type: 'ifname', elements: to },
      ],
      counters: counters.sort(),
    };
    return this.#part;
  }

  /** What of each policy and profile cannot be programmed. */
  issues(): PolicyIssue[] {
    const out: PolicyIssue[] = [];
    for (const [key, record] of this.#policies) out.push(...record.issues.map((issue) => ({ policy: key, ...issue })));
    for (const record of this.#profiles.values()) out.push(...record.issues.map((issue) => ({ policy: record.program.key, ...issue })));
    return out;
  }

  /** The policies of a local endpoint per direction, in evaluation order (their keys). */
  endpointPolicies(key: string): Record<'ingress' | 'egress', string[]> {
    const programs = [...(this.#endpoints.get(key)?.selectedBy ?? [])].flatMap((k) => this.#policies.get(k)?.program ?? []);
    const ordered = (direction: 'ingress' | 'egress') =>
      byTier(
        programs.filter((p) => p[direction]),
        (name) => this.#tierOf(name),
      ).flatMap((t) => t.programs.map((p) => p.key));
    return { ingress: ordered('ingress'), egress: ordered('egress') };
  }

  /** The policy or profile whose Deny rules count into `counter`, if any. */
  policyOfCounter(counter: string): string | undefined {
    for (const key of this.#policies.keys()) if (denyCounterName(key) === counter) return key;
    for (const record of this.#profiles.values()) if (denyCounterName(record.program.key) === counter) return record.program.key;
    return undefined;
  }

  /** Sizes, for metrics and the cost measurements. */
  stats() {
    let rules = 0;
    let activePolicies = 0;
    for (const record of this.#policies.values()) {
      if (!record.active) continue;
      activePolicies++;
      for (const chain of record.active.chains) rules += chain.rules?.length ?? 0;
    }
    return {
      endpoints: this.#endpoints.size,
      localEndpoints: this.#local.size,
      policies: this.#policies.size,
      activePolicies,
      policyRules: rules,
      sets: this.#sets.size,
      selectorEvaluations: this.#index.evaluations,
    };
  }

  // ---- Internals ----

  #changed(): void {
    this.#part = undefined;
  }

  #changedStructure(): void {
    this.#structural = true;
    this.#part = undefined;
  }

  #tierOf(name: string): TierInfo {
    return this.#tiers.get(name) ?? (name === DEFAULT_TIER ? DEFAULT_TIER_INFO : missingTier(name));
  }

  #contributionOf(entity: string): Contribution | undefined {
    if (entity.startsWith('WorkloadEndpoint/')) return this.#endpoints.get(entity.slice('WorkloadEndpoint/'.length))?.contribution;
    return this.#networkSets.get(entity)?.contribution;
  }

  /** Sets an entity's labels and contribution; `store` records the new state before membership events use it. */
  #setEntity(entity: string, labels: Labels, before: Contribution | undefined, after: Contribution, store: () => void): void {
    const same = before !== undefined && textOf(before) === textOf(after);
    if (before && !same) this.#sets.contribute(entity, before, false);
    store();
    if (before && !same) {
      this.#muted = entity;
      this.#index.setEntity(entity, labels);
      this.#muted = undefined;
      this.#sets.contribute(entity, after, true);
    } else this.#index.setEntity(entity, labels);
    this.#changed();
  }

  #networkSetProfiles(resource: NetworkSetResource): string[] {
    return resource.kind === 'NetworkSet' ? [`kns.${resource.metadata.namespace ?? 'default'}`] : [];
  }

  #networkSetLabels(resource: NetworkSetResource): Labels {
    return networkSetLabels(resource, (profile) => this.#profiles.get(profile)?.labels);
  }

  #useProfiles(entity: string, profiles: readonly string[]): void {
    for (const name of profiles) {
      const users = this.#profileUsers.get(name) ?? new Set<string>();
      this.#profileUsers.set(name, users);
      users.add(entity);
    }
  }

  #unuseProfiles(entity: string, profiles: readonly string[]): void {
    for (const name of profiles) {
      const users = this.#profileUsers.get(name);
      users?.delete(entity);
      if (users?.size === 0) this.#profileUsers.delete(name);
    }
  }

  /** A profile's labels changed: every entity naming it gets its labels again. */
  #relabel(profile: string): void {
    // A copy: upsertEndpoint files the entity under its profiles again.
    for (const entity of [...(this.#profileUsers.get(profile) ?? [])]) {
      if (entity.startsWith('WorkloadEndpoint/')) {
        const record = this.#endpoints.get(entity.slice('WorkloadEndpoint/'.length));
        if (record) this.upsertEndpoint({ ...record.input });
      } else {
        const record = this.#networkSets.get(entity);
        if (record) this.#index.setEntity(entity, this.#networkSetLabels(record.resource));
      }
    }
  }

  #dirtyUsersOf(profile: string): void {
    for (const entity of this.#profileUsers.get(profile) ?? []) {
      const key = entity.slice('WorkloadEndpoint/'.length);
      if (entity.startsWith('WorkloadEndpoint/') && this.#local.has(key)) this.#dirty.add(key);
    }
  }

  #dirtyAllLocal(): void {
    for (const key of this.#local) this.#dirty.add(key);
    this.#changed();
  }

  /** Which policies select local endpoint `key` (after its labels may have changed). */
  #select(key: string): void {
    for (const [policy, record] of this.#policies) {
      this.#selectOne(key, policy, record, record.selected.has(key), false);
      this.#refreshActivation(record);
    }
  }

  #selectOne(endpoint: string, policy: string, record: PolicyRecord, was: boolean, placeChanged: boolean): void {
    const ep = this.#endpoints.get(endpoint) as EndpointRecord;
    const now = record.program !== undefined && matches(record.program.selects, ep.labels);
    if (now) {
      record.selected.add(endpoint);
      ep.selectedBy.add(policy);
    } else {
      record.selected.delete(endpoint);
      ep.selectedBy.delete(policy);
    }
    if (now !== was || (now && placeChanged)) this.#dirty.add(endpoint);
  }

  #refreshActivation(record: PolicyRecord): void {
    if (record.selected.size > 0 && !record.active && record.program) this.#activate(record);
    else if ((record.selected.size === 0 || !record.program) && record.active) {
      this.#release(record.active);
      delete record.active;
    }
  }

  #activate(record: PolicyRecord): void {
    record.active = this.#build(record.program as PolicyProgram);
    this.#changedStructure();
  }

  #activateProfile(record: ProfileRecord): void {
    record.active = this.#build(record.program);
    this.#changedStructure();
  }

  #build(program: PolicyProgram): Active {
    const sets: string[] = [];
    const use = (set: Parameters<SetRegistry['use']>[0]) => {
      const name = this.#sets.use(set);
      sets.push(name);
      return name;
    };
    const chains: Chain[] = [];
    for (const direction of DIRECTIONS) {
      if (!program[direction]) continue;
      chains.push({ name: policyChainName(program.key, direction), rules: policyRules(program, direction, this.#ruleOptions, use) });
    }
    return { chains, sets };
  }

  #release(active: Active): void {
    for (const name of active.sets) this.#sets.release(name);
    this.#changedStructure();
  }

  /** A local endpoint is gone (or moved away): its chains, dispatch and policy selections go. */
  #unlocal(key: string, record: EndpointRecord): void {
    this.#local.delete(key);
    this.#dirty.delete(key);
    for (const policy of record.selectedBy) {
      const policyRecord = this.#policies.get(policy);
      if (!policyRecord) continue;
      policyRecord.selected.delete(key);
      this.#refreshActivation(policyRecord);
    }
    record.selectedBy.clear();
    const built = this.#endpointChains.get(key);
    if (built) {
      this.#endpointChains.delete(key);
      this.#noteDispatch(built.interfaceName, false);
      this.#changedStructure();
    }
    this.#refreshProfiles();
  }

  #rebuildEndpoint(key: string): void {
    const record = this.#endpoints.get(key);
    if (!record?.local || record.input.interfaceName === undefined) return;
    const interfaceName = record.input.interfaceName;
    const programs = [...record.selectedBy].flatMap((k) => this.#policies.get(k)?.program ?? []);
    const tiers = (direction: 'ingress' | 'egress') =>
      byTier(
        programs.filter((p) => p[direction]),
        (name) => this.#tierOf(name),
      ).map(({ tier, programs: list }) => ({
        name: tier.name,
        passes: tier.passes,
        policies: list.map((p) => ({ display: p.display, chain: policyChainName(p.key, direction) })),
      }));
    const addresses: EndpointPlan['addresses'] = { 4: [], 6: [] };
    for (const { family, interval } of record.contribution.addresses) addresses[family].push(formatIp(family, interval.start));
    this.#refreshProfiles();
    const profiles = profilesOf(record.input).flatMap((name) => {
      const profile = this.#profiles.get(name);
      if (!profile) return [];
      return [
        {
          display: name,
          ...((profile.program.ingress?.length ?? 0) > 0 ? { ingress: policyChainName(profile.program.key, 'ingress') } : {}),
          ...((profile.program.egress?.length ?? 0) > 0 ? { egress: policyChainName(profile.program.key, 'egress') } : {}),
        },
      ];
    });
    const plan: EndpointPlan = { interfaceName, addresses, tiers: { ingress: tiers('ingress'), egress: tiers('egress') }, profiles };
    const built = { ingress: endpointChain(plan, 'ingress'), egress: endpointChain(plan, 'egress'), interfaceName };
    const before = this.#endpointChains.get(key);
    if (before && JSON.stringify(before) === JSON.stringify(built)) return;
    if (before && before.interfaceName !== interfaceName) this.#noteDispatch(before.interfaceName, false);
    if (!before || before.interfaceName !== interfaceName) this.#noteDispatch(interfaceName, true);
    this.#endpointChains.set(key, built);
    this.#changedStructure();
  }

  #noteDispatch(interfaceName: string, added: boolean): void {
    const elements = dispatchElements(interfaceName);
    this.#dispatch.note(MAPS.from, interfaceName, elements.from, added);
    this.#dispatch.note(MAPS.to, interfaceName, elements.to, added);
  }

  /** Profiles named by a local endpoint are programmed; others are not. */
  #refreshProfiles(): void {
    const needed = new Set<string>();
    for (const key of this.#local) for (const name of profilesOf((this.#endpoints.get(key) as EndpointRecord).input)) needed.add(name);
    for (const [name, record] of this.#profiles) {
      if (needed.has(name) && !record.active) this.#activateProfile(record);
      else if (!needed.has(name) && record.active) {
        this.#release(record.active);
        delete record.active;
      }
    }
  }
}
