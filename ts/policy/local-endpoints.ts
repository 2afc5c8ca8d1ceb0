// The endpoints of this node: which policies select each (a selector index of its own, over local
// endpoints only, so a policy is tested against the few endpoints that carry its anchor label),
// which profiles they name (a profile is programmed while one does), and each endpoint's chains
// and dispatch map entries, rebuilt when its policies, their places, its profiles or its
// addresses change.
import type { Chain, MapElement } from '../nft/model.ts';
import type { Labels } from '../selectors/syntax.ts';
import { formatIp } from '../net/cidr.ts';
import type { Family, Interval } from './addresses.ts';
import { dispatchElements, endpointChain, policyListChain, type EndpointPlan } from './chains.ts';
import { profilesOf, type EndpointInput } from './endpoints.ts';
import { hostBaseChains, hostEndpointChains, type BuiltHostEndpoint, type FailsafePort, type HostEndpointPlan } from './host-chains.ts';
import { MAPS, policyChainName } from './names.ts';
import { PolicyLists } from './policy-lists.ts';
import { byTier, type TierInfo } from './order.ts';
import { appliesAt, canPass, type Direction, type PolicyHook, type PolicyProgram } from './program.ts';
import { SelectorIndex } from './selector-index.ts';
import { ElementJournal } from './sets.ts';

export interface LocalContext {
  program(policy: string): PolicyProgram | undefined;
  /** A profile's program, if the profile is known. */
  profile(name: string): PolicyProgram | undefined;
  tier(name: string): TierInfo;
  /** A policy selects one more or one fewer local endpoint. */
  selectionChanged(policy: string): void;
  /** A profile became named by some local endpoint, or by none any more. */
  profileNeeded(name: string, needed: boolean): void;
  structureChanged(): void;
  /** The workloads' interface prefix (never a host endpoint's) and the failsafe ports of host endpoints. */
  interfacePrefix: string;
  failsafe: { inbound: readonly FailsafePort[]; outbound: readonly FailsafePort[] };
  /** With flow logs on, their NFLOG group (the drops no rule decided log to it too). */
  flowLogGroup?: number;
}

/** What a local endpoint is programmed from: a workload's, or a host endpoint's (`host`, named profiles only). */
export type LocalInput = Pick<EndpointInput, 'key' | 'namespace' | 'serviceAccount' | 'profiles' | 'interfaceName'> & { host?: true };

interface Local {
  input: LocalInput;
  addresses: readonly { family: Family; interval: Interval }[];
  selectedBy: Set<string>;
  /** Its chains, and the policy list chains they go to (shared: the same object for every endpoint with that list). */
  built?: { ingress: Chain; egress: Chain; lists: [Chain, Chain]; text: string; interfaceName: string };
  /** A host endpoint's chains, once built. */
  hostBuilt?: { endpoint: BuiltHostEndpoint; text: string };
}

export class LocalEndpoints {
  readonly #context: LocalContext;
  readonly #endpoints = new Map<string, Local>();
  /** Policies' selectors over local endpoints. */
  readonly #index: SelectorIndex;
  /** A policy selector's text → the policies with it. */
  readonly #bySelector = new Map<string, Set<string>>();
  /** Policy → the local endpoints it selects. */
  readonly #selected = new Map<string, Set<string>>();
  /** Profile → how many local endpoints name it. */
  readonly #profileUses = new Map<string, number>();
  readonly #dirty = new Set<string>();
  /** Dispatch map changes since the last flush. */
  readonly dispatch = new ElementJournal<MapElement>();
  readonly #lists = new PolicyLists();

  constructor(context: LocalContext) {
    this.#context = context;
    this.#index = new SelectorIndex((selector, key, added) => this.#membership(selector, key, added));
  }

  get size(): number {
    return this.#endpoints.size;
  }

  has(key: string): boolean {
    return this.#endpoints.has(key);
  }

  /** The host interface a local endpoint's chains and dispatch entries were last built for (once built). */
  programmed(key: string): string | undefined {
    return this.#endpoints.get(key)?.built?.interfaceName;
  }

  /** The policies selecting a local endpoint. */
  selectedBy(key: string): ReadonlySet<string> {
    return this.#endpoints.get(key)?.selectedBy ?? new Set();
  }

  /** The local endpoints a policy selects. */
  selection(policy: string): ReadonlySet<string> {
    return this.#selected.get(policy) ?? new Set();
  }

  /** Adds or changes a local endpoint. */
  set(input: LocalInput, labels: Labels, addresses: Local['addresses']): void {
    const before = this.#endpoints.get(input.key);
    const local: Local = {
      input,
      addresses,
      selectedBy: before?.selectedBy ?? new Set(),
      ...(before?.built ? { built: before.built } : {}),
    };
    this.#endpoints.set(input.key, local);
    // The new names first: a profile named before and after is never unused in between.
    this.#countProfiles(profilesOf(input), 1);
    this.#countProfiles(before ? profilesOf(before.input) : [], -1);
    this.#dirty.add(input.key);
    this.#index.setEntity(input.key, labels);
  }

  remove(key: string): void {
    const local = this.#endpoints.get(key);
    if (!local) return;
    this.#index.removeEntity(key);
    this.#endpoints.delete(key);
    this.#dirty.delete(key);
    this.#countProfiles(profilesOf(local.input), -1);
    if (local.built) {
      this.#noteDispatch(local.built.interfaceName, false);
      this.#context.structureChanged();
    }
    if (local.hostBuilt) this.#context.structureChanged();
  }

  /** A policy's selector (undefined: it has none any more); returns whether its selection changed. */
  setPolicy(policy: string, before: PolicyProgram | undefined, after: PolicyProgram | undefined): void {
    const placeChanged =
      !before ||
      !after ||
      before.tier !== after.tier ||
      before.order !== after.order ||
      !before.ingress !== !after.ingress ||
      !before.egress !== !after.egress ||
      before.applyOnForward !== after.applyOnForward ||
      before.preDNAT !== after.preDNAT ||
      before.doNotTrack !== after.doNotTrack ||
      canPass(before, 'ingress') !== canPass(after, 'ingress');
    const was = this.#selected.get(policy) ?? new Set<string>();
    const now = new Set<string>();
    if (after) {
      const users = this.#bySelector.get(after.selectsText) ?? new Set<string>();
      this.#bySelector.set(after.selectsText, users);
      users.add(policy);
      for (const key of this.#index.register(after.selectsText, after.selects)) now.add(key);
    }
    if (before) {
      const users = this.#bySelector.get(before.selectsText);
      // The new program's registration came first: a selector both use stays registered.
      if (!after || after.selectsText !== before.selectsText) users?.delete(policy);
      if (users?.size === 0) this.#bySelector.delete(before.selectsText);
      this.#index.unregister(before.selectsText);
    }
    for (const key of was) if (!now.has(key)) this.#unselect(policy, key);
    for (const key of now) if (!was.has(key)) this.#select(policy, key);
    if (placeChanged) for (const key of now) this.#dirty.add(key);
    if (now.size > 0) this.#selected.set(policy, now);
    else this.#selected.delete(policy);
    if (now.size !== was.size || [...now].some((key) => !was.has(key))) this.#context.selectionChanged(policy);
  }

  /** Every endpoint naming the profile gets its chains again (its rules' directions may have changed). */
  profileChanged(name: string): void {
    for (const [key, local] of this.#endpoints) if (profilesOf(local.input).includes(name)) this.#dirty.add(key);
  }

  dirtyAll(): void {
    for (const key of this.#endpoints.keys()) this.#dirty.add(key);
  }

  /** Rebuilds the chains of every endpoint that may have changed. */
  rebuild(): void {
    for (const key of this.#dirty) this.#rebuild(key);
    this.#dirty.clear();
  }

  /** The endpoints' chains and dispatch map elements, by interface name. */
  chains(programmed: (chain: string) => boolean): { chains: Chain[]; from: MapElement[]; to: MapElement[] } {
    const built = [...this.#endpoints.values()].flatMap((local) => (local.built ? [local.built] : []));
    built.sort((a, b) => (a.interfaceName < b.interfaceName ? -1 : 1));
    const chains: Chain[] = [];
    const from: MapElement[] = [];
    const to: MapElement[] = [];
    const used = new Set<string>();
    for (const b of built) {
      chains.push(b.ingress, b.egress);
      for (const list of b.lists) used.add(list.name);
      const elements = dispatchElements(b.interfaceName);
      from.push(elements.from);
      to.push(elements.to);
    }
    const lists = this.#lists.kept(used, programmed);
    chains.push(...lists);
    chains.push(...this.#hostChains(new Set(lists.map((list) => list.name))));
    return { chains, from, to };
  }

  /** The host endpoints' chains: per interface the first endpoint by key; lists the workloads' have are theirs. */
  #hostChains(listed: Set<string>): Chain[] {
    const byInterface = new Map<string, BuiltHostEndpoint>();
    const keys = [...this.#endpoints.keys()].sort();
    for (const key of keys) {
      const built = this.#endpoints.get(key)?.hostBuilt?.endpoint;
      if (built && !byInterface.has(built.interfaceName)) byInterface.set(built.interfaceName, built);
    }
    const endpoints = [...byInterface.values()];
    const chains: Chain[] = hostBaseChains(endpoints, this.#context.failsafe, this.#context.interfacePrefix);
    for (const endpoint of endpoints)
      for (const chain of endpoint.chains) {
        if (listed.has(chain.name)) continue;
        listed.add(chain.name);
        chains.push(chain);
      }
    return chains;
  }

  #membership(selector: string, key: string, added: boolean): void {
    for (const policy of this.#bySelector.get(selector) ?? []) {
      const selected = this.#selected.get(policy) ?? new Set<string>();
      if (added === selected.has(key)) continue;
      if (added) {
        selected.add(key);
        this.#selected.set(policy, selected);
        this.#select(policy, key);
      } else {
        selected.delete(key);
        if (selected.size === 0) this.#selected.delete(policy);
        this.#unselect(policy, key);
      }
      this.#context.selectionChanged(policy);
    }
  }

  #select(policy: string, key: string): void {
    this.#endpoints.get(key)?.selectedBy.add(policy);
    this.#dirty.add(key);
  }

  #unselect(policy: string, key: string): void {
    this.#endpoints.get(key)?.selectedBy.delete(policy);
    this.#dirty.add(key);
  }

  #countProfiles(names: readonly string[], delta: 1 | -1): void {
    for (const name of names) {
      const count = (this.#profileUses.get(name) ?? 0) + delta;
      if (count > 0) this.#profileUses.set(name, count);
      else this.#profileUses.delete(name);
      if (count === 0 && delta === -1) this.#context.profileNeeded(name, false);
      if (count === 1 && delta === 1) this.#context.profileNeeded(name, true);
    }
  }

  /** Whether some local endpoint names the profile. */
  profileUsed(name: string): boolean {
    return this.#profileUses.has(name);
  }

  #rebuild(key: string): void {
    const local = this.#endpoints.get(key);
    const interfaceName = local?.input.interfaceName;
    if (!local || interfaceName === undefined) return;
    const programs = [...local.selectedBy].flatMap((policy) => this.#context.program(policy) ?? []);
    const tiers = (direction: Direction, hook: PolicyHook = 'endpoint') =>
      byTier(
        programs.filter((p) => p[direction] && appliesAt(p, hook)),
        (name) => this.#context.tier(name),
      ).map(({ tier, programs: list }) => ({
        name: tier.name,
        passes: tier.passes,
        policies: list.map((p) => ({ display: p.display, chain: policyChainName(p.key, direction), canPass: canPass(p, direction) })),
      }));
    const profiles = this.#profilePlans(local.input);
    if (local.input.host) {
      const plan: HostEndpointPlan = {
        interfaceName,
        tiers: {
          host: { ingress: tiers('ingress'), egress: tiers('egress') },
          forward: { ingress: tiers('ingress', 'forward'), egress: tiers('egress', 'forward') },
          preDNAT: { ingress: tiers('ingress', 'preDNAT'), egress: [] },
          untracked: { ingress: tiers('ingress', 'untracked'), egress: tiers('egress', 'untracked') },
        },
        profiles,
      };
      const endpoint = hostEndpointChains(plan, this.#context.flowLogGroup);
      const text = JSON.stringify(endpoint);
      if (local.hostBuilt?.text === text) return;
      local.hostBuilt = { endpoint, text };
      this.#context.structureChanged();
      return;
    }
    const addresses: EndpointPlan['addresses'] = { 4: [], 6: [] };
    for (const { family, interval } of local.addresses) addresses[family].push(formatIp(family, interval.start));
    const plan: EndpointPlan = { interfaceName, addresses, tiers: { ingress: tiers('ingress'), egress: tiers('egress') }, profiles };
    const list = (direction: Direction) => this.#lists.shared(policyListChain(plan, direction, 'drop', this.#context.flowLogGroup));
    const lists = { ingress: list('ingress'), egress: list('egress') };
    const ingress = endpointChain(plan, 'ingress', lists.ingress.name);
    const egress = endpointChain(plan, 'egress', lists.egress.name);
    const text = JSON.stringify([ingress, egress]);
    const before = local.built;
    if (before?.text === text) return;
    if (before && before.interfaceName !== interfaceName) this.#noteDispatch(before.interfaceName, false);
    if (!before || before.interfaceName !== interfaceName) this.#noteDispatch(interfaceName, true);
    local.built = { ingress, egress, lists: [lists.ingress, lists.egress], text, interfaceName };
    this.#context.structureChanged();
  }

  /** The chains of the profiles an endpoint names, in order; a profile with no rules in a direction has none there. */
  #profilePlans(input: LocalInput): EndpointPlan['profiles'] {
    return profilesOf(input).flatMap((name) => {
      const program = this.#context.profile(name);
      if (!program) return [];
      return [
        {
          display: name,
          ...((program.ingress?.length ?? 0) > 0 ? { ingress: policyChainName(program.key, 'ingress') } : {}),
          ...((program.egress?.length ?? 0) > 0 ? { egress: policyChainName(program.key, 'egress') } : {}),
        },
      ];
    });
  }

  #noteDispatch(interfaceName: string, added: boolean): void {
    const elements = dispatchElements(interfaceName);
    this.dispatch.note(MAPS.from, interfaceName, elements.from, added);
    this.dispatch.note(MAPS.to, interfaceName, elements.to, added);
  }
}
