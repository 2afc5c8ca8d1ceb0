// What the policy compiler knows of everything that has addresses: endpoints of every node, host
// endpoints and network sets. Each is an entity of the selector index with labels (its own and
// its profiles') and a contribution to the sets whose selectors match it; the local ones (this
// node's, with an interface) are handed to the local endpoints, which program their chains.
import type { Labels } from '../selectors/syntax.ts';
import type { NetworkSetResource } from '../model/policy.ts';
import { netInterval, type Family } from './addresses.ts';
import {
  endpointLabels,
  hostEndpointLabels,
  networkSetKey,
  networkSetLabels,
  profilesOf,
  type EndpointInput,
  type HostEndpointInput,
} from './endpoints.ts';
import type { LocalEndpoints } from './local-endpoints.ts';
import { textOf } from './programs.ts';
import type { SelectorIndex } from './selector-index.ts';
import type { Contribution, SetRegistry } from './set-registry.ts';

/** What an address belongs to: a pod, a host endpoint or a network set (its addresses as the engine holds them). */
export interface AddressedEntity {
  kind: 'pod' | 'hep' | 'net';
  namespace?: string;
  name: string;
  labels: Labels;
  addresses: readonly { family: Family; interval: { start: bigint; end: bigint } }[];
}

/** What the entities need of the engine around them. */
export interface EntityContext {
  nodeName: string;
  index: SelectorIndex;
  sets: SetRegistry;
  local: LocalEndpoints;
  /** A profile's labels, given to the entities that name it. */
  profileLabels: (profile: string) => Labels | undefined;
  /** Something changed: the part is made again. */
  changed: () => void;
  /** An entity has an address of `family` (after its sets took it). */
  sawFamily?: (family: Family) => void;
}

interface EndpointRecord {
  input: EndpointInput;
  entity: string;
  labels: Labels;
  contribution: Contribution;
  local: boolean;
}

const ENDPOINT_ENTITY = 'WorkloadEndpoint/';
/** A host endpoint's entity in the selector index, and its key among local endpoints (no namespace has capitals). */
const HOST_ENTITY = 'HostEndpoint/';

/** The single addresses among `texts` (an endpoint's or host endpoint's: a range there is a mistake, not a member). */
const singleAddresses = (texts: readonly string[]): Contribution['addresses'] =>
  texts.flatMap((text) => {
    const found = netInterval(text);
    return found && found.interval.start === found.interval.end ? [found] : [];
  });

const networkSetProfiles = (resource: NetworkSetResource): string[] =>
  resource.kind === 'NetworkSet' ? [`kns.${resource.metadata.namespace ?? 'default'}`] : [];

export class AddressedEntities {
  readonly #context: EntityContext;
  readonly #endpoints = new Map<string, EndpointRecord>();
  readonly #networkSets = new Map<string, { resource: NetworkSetResource; contribution: Contribution }>();
  readonly #hostEndpoints = new Map<string, { input: HostEndpointInput; contribution: Contribution; local: boolean }>();
  /** Profile name → the entities (endpoints, host endpoints, namespaced network sets) whose labels it gives. */
  readonly #profileUsers = new Map<string, Set<string>>();
  /** The entity whose set contributions are being replaced: membership events are not theirs to apply. */
  #muted: string | undefined;

  constructor(context: EntityContext) {
    this.#context = context;
  }

  /** Whether a membership event of `entity` is the sets' to apply (not while its contribution is replaced). */
  applies(entity: string): boolean {
    return entity !== this.#muted;
  }

  get endpointCount(): number {
    return this.#endpoints.size;
  }

  get localHostEndpointCount(): number {
    let count = 0;
    for (const record of this.#hostEndpoints.values()) if (record.local) count++;
    return count;
  }

  upsertEndpoint(input: EndpointInput): void {
    const { local: locals, nodeName, profileLabels } = this.#context;
    const key = input.key;
    const before = this.#endpoints.get(key);
    const entity = `${ENDPOINT_ENTITY}${key}`;
    const labels = endpointLabels(input, profileLabels);
    const local = input.node === nodeName && input.interfaceName !== undefined;
    const contribution: Contribution = {
      addresses: singleAddresses(input.addresses),
      ports: input.ports ?? [],
      ...(local ? { local: true as const } : {}),
    };
    const record: EndpointRecord = { input, entity, labels, contribution, local };
    if (before) this.#unuseProfiles(entity, profilesOf(before.input));
    this.#useProfiles(entity, profilesOf(input));
    this.#setEntity(entity, labels, before?.contribution, contribution, () => this.#endpoints.set(key, record));
    if (local) locals.set(input, labels, contribution.addresses);
    else if (before?.local) locals.remove(key);
  }

  removeEndpoint(key: string): void {
    const record = this.#endpoints.get(key);
    if (!record) return;
    this.#context.index.removeEntity(record.entity);
    this.#unuseProfiles(record.entity, profilesOf(record.input));
    if (record.local) this.#context.local.remove(key);
    this.#endpoints.delete(key);
    this.#context.changed();
  }

  upsertHostEndpoint(input: HostEndpointInput): void {
    const { local: locals, nodeName, profileLabels } = this.#context;
    const entity = `${HOST_ENTITY}${input.name}`;
    const before = this.#hostEndpoints.get(input.name);
    const contribution: Contribution = { addresses: singleAddresses(input.expectedIPs), ports: input.ports ?? [] };
    const local = input.node === nodeName && input.interfaceName !== undefined;
    if (before) this.#unuseProfiles(entity, before.input.profiles);
    this.#useProfiles(entity, input.profiles);
    const labels = hostEndpointLabels(input, profileLabels);
    this.#setEntity(entity, labels, before?.contribution, contribution, () =>
      this.#hostEndpoints.set(input.name, { input, contribution, local }),
    );
    if (local)
      locals.set(
        { key: entity, namespace: '', profiles: input.profiles, interfaceName: input.interfaceName, host: true },
        labels,
        contribution.addresses,
      );
    else if (before?.local) locals.remove(entity);
  }

  removeHostEndpoint(name: string): void {
    const record = this.#hostEndpoints.get(name);
    if (!record) return;
    const entity = `${HOST_ENTITY}${name}`;
    this.#context.index.removeEntity(entity);
    this.#unuseProfiles(entity, record.input.profiles);
    if (record.local) this.#context.local.remove(entity);
    this.#hostEndpoints.delete(name);
    this.#context.changed();
  }

  upsertNetworkSet(resource: NetworkSetResource): void {
    const key = networkSetKey(resource);
    const before = this.#networkSets.get(key);
    const contribution: Contribution = { addresses: (resource.spec.nets ?? []).flatMap((text) => netInterval(text) ?? []), ports: [] };
    if (before) this.#unuseProfiles(key, networkSetProfiles(before.resource));
    this.#useProfiles(key, networkSetProfiles(resource));
    const labels = networkSetLabels(resource, this.#context.profileLabels);
    this.#setEntity(key, labels, before?.contribution, contribution, () => this.#networkSets.set(key, { resource, contribution }));
  }

  removeNetworkSet(kind: NetworkSetResource['kind'], name: string, namespace?: string): void {
    const key = networkSetKey({ kind, apiVersion: '', metadata: { name, ...(namespace ? { namespace } : {}) }, spec: {} });
    const record = this.#networkSets.get(key);
    if (!record) return;
    this.#context.index.removeEntity(key);
    this.#unuseProfiles(key, networkSetProfiles(record.resource));
    this.#networkSets.delete(key);
    this.#context.changed();
  }

  /** A profile's labels changed: every entity naming it gets its labels again. */
  relabel(profile: string): void {
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
        if (record) this.#context.index.setEntity(entity, networkSetLabels(record.resource, this.#context.profileLabels));
      }
    }
  }

  /** What `entity` gives the sets matching it. */
  contributionOf(entity: string): Contribution | undefined {
    if (entity.startsWith(ENDPOINT_ENTITY)) return this.#endpoints.get(entity.slice(ENDPOINT_ENTITY.length))?.contribution;
    if (entity.startsWith(HOST_ENTITY)) return this.#hostEndpoints.get(entity.slice(HOST_ENTITY.length))?.contribution;
    return this.#networkSets.get(entity)?.contribution;
  }

  /** Every endpoint, host endpoint and network set with its addresses: what flow logs name an address by. */
  *addressed(): Generator<AddressedEntity> {
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

  /** Sets an entity's labels and contribution; `store` records the new state before membership events use it. */
  #setEntity(entity: string, labels: Labels, before: Contribution | undefined, after: Contribution, store: () => void): void {
    const { index, sets } = this.#context;
    const same = before !== undefined && textOf(before) === textOf(after);
    if (before && !same) sets.contribute(entity, before, false);
    store();
    if (before && !same) {
      this.#muted = entity;
      index.setEntity(entity, labels);
      this.#muted = undefined;
      sets.contribute(entity, after, true);
    } else index.setEntity(entity, labels);
    for (const { family } of after.addresses) this.#context.sawFamily?.(family);
    this.#context.changed();
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
}
