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
import type { Labels } from '../selectors/syntax.ts';
import type { NetworkPolicyResource, NetworkSetResource, ProfileResource, TierResource } from '../model/policy.ts';
import { DEFAULT_TIER } from '../model/policy.ts';
import { netInterval, type Family } from './addresses.ts';
import { fixedChains } from './chains.ts';
import { FlowDecisions, type MarkedRule } from './flow-decisions.ts';
import {
  endpointLabels,
  hostEndpointLabels,
  networkSetKey,
  networkSetLabels,
  profilesOf,
  type EndpointInput,
  type HostEndpointInput,
} from './endpoints.ts';
import { DEFAULT_FAILSAFE, parseFailsafePorts, type FailsafePort } from './host-chains.ts';
import { LocalEndpoints } from './local-endpoints.ts';
import { DEFAULT_DENY_COUNTERS, MAPS } from './names.ts';
import { byTier, DEFAULT_TIER_INFO, missingTier, tierInfo, type TierInfo } from './order.ts';
import { policyKey, policyProgram, profileProgram, type Direction, type PolicyProgram, type ProgramIssue } from './program.ts';
import { Programs, textOf, type PolicyIssue } from './programs.ts';
import { SelectorIndex } from './selector-index.ts';
import { SetRegistry, type Contribution } from './set-registry.ts';

export type { PolicyIssue } from './programs.ts';

/** What an address belongs to: a pod, a host endpoint or a network set (its addresses as the engine holds them). */
export interface AddressedEntity {
  kind: 'pod' | 'hep' | 'net';
  namespace?: string;
  name: string;
  labels: Labels;
  addresses: readonly { family: Family; interval: { start: bigint; end: bigint } }[];
}

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

interface EndpointRecord {
  input: EndpointInput;
  entity: string;
  labels: Labels;
  contribution: Contribution;
  local: boolean;
}

const endpointEntity = (key: string) => `WorkloadEndpoint/${key}`;
const ENDPOINT_ENTITY = 'WorkloadEndpoint/';
/** A host endpoint's entity in the selector index, and its key among local endpoints (no namespace has capitals). */
const HOST_ENTITY = 'HostEndpoint/';

export class PolicyEngine {
  readonly #options: Required<Omit<PolicyEngineOptions, 'flowLogGroup'>> & Pick<PolicyEngineOptions, 'flowLogGroup'>;
  /** Every endpoint and network set, for the sets of rule selectors. */
  readonly #index: SelectorIndex;
  readonly #sets: SetRegistry;
  readonly #local: LocalEndpoints;
  readonly #endpoints = new Map<string, EndpointRecord>();
  readonly #networkSets = new Map<string, { resource: NetworkSetResource; contribution: Contribution }>();
  readonly #hostEndpoints = new Map<string, { input: HostEndpointInput; contribution: Contribution; local: boolean }>();
  readonly #programs: Programs;
  /** Profile name → the entities (endpoints, namespaced network sets) whose labels it gives. */
  readonly #profileUsers = new Map<string, Set<string>>();
  readonly #tiers = new Map<string, TierInfo>();
  #structural = true;
  /** Counts changes: what is derived from the inputs (flow-lookup.ts) is made again when it moved. */
  #generation = 0;
  /** The chains every part has, built once: the same objects each time, which the table writer skips. */
  #fixedChains: Chain[] | undefined;
  #part: TablePart | undefined;
  /** The entity whose set contributions are being replaced: membership events are not theirs to apply. */
  #muted: string | undefined;
  /** With flow logs on: the numbers of the rules that allow, in connections' marks. */
  #flowDecisions: FlowDecisions | undefined;

  constructor(options: PolicyEngineOptions) {
    this.#options = {
      families: [4, 6],
      interfacePrefix: 'cali',
      logGroup: 20,
      logPerSecond: 10,
      failsafe: { inbound: parseFailsafePorts(DEFAULT_FAILSAFE.inbound), outbound: parseFailsafePorts(DEFAULT_FAILSAFE.outbound) },
      ...options,
    };
    this.#index = new SelectorIndex((selector, entity, added) => {
      if (entity !== this.#muted) this.#sets.membershipChanged(selector, entity, added);
    });
    this.#sets = new SetRegistry(
      this.#index,
      (entity) => this.#contributionOf(entity),
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
  }

  // ---- Inputs ----

  /** Adds or changes an endpoint (of any node; those of this node with an interface are programmed). */
  upsertEndpoint(input: EndpointInput): void {
    const key = input.key;
    const before = this.#endpoints.get(key);
    const entity = endpointEntity(key);
    const labels = endpointLabels(input, (profile) => this.#programs.profiles.get(profile)?.labels);
    const contribution: Contribution = {
      addresses: input.addresses.flatMap((text) => {
        const found = netInterval(text);
        return found && found.interval.start === found.interval.end ? [found] : [];
      }),
      ports: input.ports ?? [],
    };
    const local = input.node === this.#options.nodeName && input.interfaceName !== undefined;
    const record: EndpointRecord = { input, entity, labels, contribution, local };
    if (before) this.#unuseProfiles(entity, profilesOf(before.input));
    this.#useProfiles(entity, profilesOf(input));
    this.#setEntity(entity, labels, before?.contribution, contribution, () => this.#endpoints.set(key, record));
    if (local) this.#local.set(input, labels, contribution.addresses);
    else if (before?.local) this.#local.remove(key);
  }

  removeEndpoint(key: string): void {
    const record = this.#endpoints.get(key);
    if (!record) return;
    this.#index.removeEntity(record.entity);
    this.#unuseProfiles(record.entity, profilesOf(record.input));
    if (record.local) this.#local.remove(key);
    this.#endpoints.delete(key);
    this.#changed();
  }

  /**
   * Adds or changes a host endpoint (of any node: those of this node with an interface are
   * programmed; every one's expected addresses are in the sets of selectors matching it).
   */
  upsertHostEndpoint(input: HostEndpointInput): void {
    const entity = `${HOST_ENTITY}${input.name}`;
    const before = this.#hostEndpoints.get(input.name);
    const contribution: Contribution = {
      addresses: input.expectedIPs.flatMap((text) => {
        const found = netInterval(text);
        return found && found.interval.start === found.interval.end ? [found] : [];
      }),
      ports: input.ports ?? [],
    };
    const local = input.node === this.#options.nodeName && input.interfaceName !== undefined;
    if (before) this.#unuseProfiles(entity, before.input.profiles);
    this.#useProfiles(entity, input.profiles);
    const labels = hostEndpointLabels(input, (profile) => this.#programs.profiles.get(profile)?.labels);
    this.#setEntity(entity, labels, before?.contribution, contribution, () =>
      this.#hostEndpoints.set(input.name, { input, contribution, local }),
    );
    if (local)
      this.#local.set(
        { key: entity, namespace: '', profiles: input.profiles, interfaceName: input.interfaceName, host: true },
        labels,
        contribution.addresses,
      );
    else if (before?.local) this.#local.remove(entity);
  }

  removeHostEndpoint(name: string): void {
    const record = this.#hostEndpoints.get(name);
    if (!record) return;
    const entity = `${HOST_ENTITY}${name}`;
    this.#index.removeEntity(entity);
    this.#unuseProfiles(entity, record.input.profiles);
    if (record.local) this.#local.remove(entity);
    this.#hostEndpoints.delete(name);
    this.#changed();
  }

  /** Adds or changes a profile: its labels (given to the endpoints naming it) and its rules. */
  upsertProfile(profile: ProfileResource): PolicyIssue[] {
    const name = profile.metadata.name;
    const issues: ProgramIssue[] = [];
    const program = profileProgram(profile, issues);
    const labels = profile.spec.labelsToApply ?? {};
    const record = { program, issues, labels };
    const { before, changed } = this.#programs.set(this.#programs.profiles, name, record);
    if (!before || textOf(before.labels) !== textOf(labels)) this.#relabel(name);
    if (changed) {
      this.#programs.need(record, this.#local.profileUsed(name));
      this.#local.profileChanged(name);
    }
    this.#changed();
    return issues.map((issue) => ({ policy: program.key, ...issue }));
  }

  removeProfile(name: string): void {
    if (!this.#programs.remove(this.#programs.profiles, name)) return;
    this.#relabel(name);
    this.#local.profileChanged(name);
    this.#changed();
  }

  upsertNetworkSet(resource: NetworkSetResource): void {
    const key = networkSetKey(resource);
    const before = this.#networkSets.get(key);
    const contribution: Contribution = { addresses: (resource.spec.nets ?? []).flatMap((text) => netInterval(text) ?? []), ports: [] };
    if (before) this.#unuseProfiles(key, networkSetProfiles(before.resource));
    this.#useProfiles(key, networkSetProfiles(resource));
    const labels = this.#networkSetLabels(resource);
    this.#setEntity(key, labels, before?.contribution, contribution, () => this.#networkSets.set(key, { resource, contribution }));
  }

  removeNetworkSet(kind: NetworkSetResource['kind'], name: string, namespace?: string): void {
    const key = networkSetKey({ kind, apiVersion: '', metadata: { name, ...(namespace ? { namespace } : {}) }, spec: {} });
    const record = this.#networkSets.get(key);
    if (!record) return;
    this.#index.removeEntity(key);
    this.#unuseProfiles(key, networkSetProfiles(record.resource));
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
  *addressedEntities(): Generator<AddressedEntity> {
    for (const { input, contribution } of this.#endpoints.values())
      yield { kind: 'pod', namespace: input.namespace, name: input.name, labels: input.labels, addresses: contribution.addresses };
    for (const { input, contribution } of this.#hostEndpoints.values())
      yield { kind: 'hep', name: input.name, labels: input.labels, addresses: contribution.addresses };
    for (const { resource, contribution } of this.#networkSets.values())
      yield {
        kind: 'net',
        ...(resource.metadata.namespace ? { namespace: resource.metadata.namespace } : {}),
        name: resource.metadata.name,
        labels: resource.metadata.labels ?? {},
        addresses: contribution.addresses,
      };
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
    let localHosts = 0;
    for (const record of this.#hostEndpoints.values()) if (record.local) localHosts++;
    return {
      endpoints: this.#endpoints.size,
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

  #contributionOf(entity: string): Contribution | undefined {
    if (entity.startsWith(ENDPOINT_ENTITY)) return this.#endpoints.get(entity.slice(ENDPOINT_ENTITY.length))?.contribution;
    if (entity.startsWith(HOST_ENTITY)) return this.#hostEndpoints.get(entity.slice(HOST_ENTITY.length))?.contribution;
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

  #networkSetLabels(resource: NetworkSetResource): Labels {
    return networkSetLabels(resource, (profile) => this.#programs.profiles.get(profile)?.labels);
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
      if (entity.startsWith(ENDPOINT_ENTITY)) {
        const record = this.#endpoints.get(entity.slice(ENDPOINT_ENTITY.length));
        if (record) this.upsertEndpoint(record.input);
      } else if (entity.startsWith(HOST_ENTITY)) {
        const record = this.#hostEndpoints.get(entity.slice(HOST_ENTITY.length));
        if (record) this.upsertHostEndpoint(record.input);
      } else {
        const record = this.#networkSets.get(entity);
        if (record) this.#index.setEntity(entity, this.#networkSetLabels(record.resource));
      }
    }
  }
}

function networkSetProfiles(resource: NetworkSetResource): string[] {
  return resource.kind === 'NetworkSet' ? [`kns.${resource.metadata.namespace ?? 'default'}`] : [];
}
