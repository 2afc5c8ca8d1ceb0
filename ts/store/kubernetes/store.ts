// The Store on the Kubernetes API (datastore_type "kubernetes"): each document is a custom
// resource whose spec is the value (for a native kind, the resource is the document); a write's
// condition is the object's resourceVersion (a create fails if the name exists). The API has no
// multi-object transaction, so a commit applies its writes one by one in the caller's order and,
// when a condition fails part-way, undoes the ones already applied in reverse: callers see all or
// nothing, and their ordering (the handle before the block it points into) keeps a crash between
// two writes harmless. Given one HTTP/2 connection or connections to spare (netplug-node's), a
// commit sends the writes before its last at once (over HTTP/1.1 one per connection), and the
// last only once they all held: callers put
// last the write the others must precede (the block an allocation takes, the handle a release
// frees), and a node's IPAM turn so costs two round trips instead of four.
import type { KubeClient } from '../../k8s/client.ts';
import type { Committed, Entry, Read, ReadResult, Store, Write } from '../store.ts';
import { changesNothing, StoreError } from '../store.ts';
import { documentOf, keyOf, nodeEntry, resource, type KubeObject } from './documents.ts';
import { KEY_ANNOTATION, NODES_PREFIX, kindOfKey, kindsOfPrefix, type Kind } from './resources.ts';

interface NotFoundStatus {
  details?: { name?: string };
}

/** A write a commit applied: its new revision, and what the key held before (to undo it). */
interface Applied {
  write: Write;
  revision: string | undefined;
  before: { revision: string; value: unknown } | undefined;
}

const METADATA_ONLY = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

export class KubeStore implements Store {
  readonly client: KubeClient;
  readonly description: string;
  readonly transactional = false;
  /** What this store last read or wrote per key: a failed commit restores it. */
  private readonly known = new Map<string, { revision: string; value: unknown }>();

  /** Further connections to the same API, for the writes of a commit that go out at once. */
  private readonly spare: readonly KubeClient[];

  constructor(client: KubeClient, spare: readonly KubeClient[] = []) {
    this.client = client;
    this.spare = spare;
    this.description = `the Kubernetes API at ${client.server}`;
  }

  get<T>(key: string): Promise<Entry<T> | undefined> {
    return this.getVia(this.client, key);
  }

  private async getVia<T>(client: KubeClient, key: string): Promise<Entry<T> | undefined> {
    if (key.startsWith(NODES_PREFIX)) {
      const node = await client.get<KubeObject>(`/api/v1/nodes/${encodeURIComponent(key.slice(NODES_PREFIX.length))}`, 'get on nodes');
      return node && (nodeEntry(node) as Entry<T>);
    }
    const { kind, rest } = this.kindOf(key);
    const { status, json } = await client.send({ method: 'GET', path: objectPath(kind, kind.place(rest)) }, needs('get', kind));
    if (status === 404) return this.absent(kind, json);
    const object = json as KubeObject;
    const stored = object.metadata.annotations?.[KEY_ANNOTATION];
    return stored === undefined || stored === key ? this.remember<T>(key, object) : undefined;
  }

  async list<T>(prefix: string): Promise<Entry<T>[]> {
    if (prefix === NODES_PREFIX) {
      const { items } = (await this.client.get<{ items: KubeObject[] }>('/api/v1/nodes', 'list on nodes')) ?? { items: [] };
      return items.map((node) => nodeEntry(node) as Entry<T>);
    }
    const entries: Entry<T>[] = [];
    for (const { kind, restPrefix } of kindsOfPrefix(prefix)) {
      for (const object of await this.listObjects(kind, restPrefix, false)) {
        const key = keyOf(kind, object);
        if (key?.startsWith(prefix)) entries.push(this.remember<T>(key, object));
      }
    }
    return entries;
  }

  async listKeys(prefix: string): Promise<string[]> {
    if (prefix === NODES_PREFIX) return (await this.list(prefix)).map((e) => e.key);
    const found: string[] = [];
    for (const { kind, restPrefix } of kindsOfPrefix(prefix)) {
      for (const object of await this.listObjects(kind, restPrefix, true)) {
        const key = keyOf(kind, object);
        if (key?.startsWith(prefix)) found.push(key);
      }
    }
    return found;
  }

  /** The reads one after another (one connection carries them): each is current, but not all at one revision. */
  async read<const R extends readonly Read[]>(reads: R): Promise<{ -readonly [I in keyof R]: ReadResult<R[I]> }> {
    const results: unknown[] = [];
    for (const r of reads)
      results.push('get' in r ? await this.get(r.get) : 'list' in r ? await this.list(r.list) : await this.listKeys(r.keys));
    return results as { -readonly [I in keyof R]: ReadResult<R[I]> };
  }

  warmUp(): void {
    this.client.warmUp();
  }

  async commit(writes: readonly Write[]): Promise<boolean> {
    return (await this.applyAll(writes)) !== undefined;
  }

  /** The writes wave by wave (see waves), the revisions they made; undefined (all undone) if a condition failed. */
  private async applyAll(writes: readonly Write[]): Promise<Record<string, string> | undefined> {
    const done: Applied[] = [];
    // One multiplexed connection carries a wave's writes at once by itself.
    const clients = this.client.multiplexed ? [this.client] : [this.client, ...this.spare];
    try {
      for (const wave of this.waves(writes)) {
        const outcomes = await Promise.allSettled(
          wave.map(async (write, i) => {
            const before = this.known.get(write.key);
            const applied = await this.apply(write, clients[i % clients.length]);
            if (applied !== false) done.push({ write, revision: applied, before });
            return applied;
          }),
        );
        // Every write of the wave settled first: what held is undone whatever failed.
        const thrown = outcomes.find((o) => o.status === 'rejected');
        if (thrown) throw thrown.reason;
        if (outcomes.some((o) => o.status === 'fulfilled' && o.value === false)) {
          await this.undo(done);
          return undefined;
        }
      }
      const revisions: Record<string, string> = {};
      for (const { write, revision } of done) if (('create' in write || 'update' in write) && revision) revisions[write.key] = revision;
      return revisions;
    } catch (err) {
      await this.undo(done).catch(() => undefined);
      throw err;
    }
  }

  /**
   * The writes in the order they go: one at a time; with spare connections, those before the last
   * at once (each on a connection of its own, when their keys differ), then the last.
   */
  private waves(writes: readonly Write[]): (readonly Write[])[] {
    const before = writes.slice(0, -1);
    const atOnce =
      (this.spare.length > 0 || this.client.multiplexed) && before.length > 1 && new Set(before.map((w) => w.key)).size === before.length;
    return atOnce ? [before, writes.slice(-1)] : writes.map((write) => [write]);
  }

  async commitElseRead(
    writes: readonly Write[],
    reads: readonly Read[],
    otherwisePut: readonly { key: string; value: unknown }[] = [],
  ): Promise<Committed | { committed: false; results: unknown[] }> {
    const revisions = await this.applyAll(writes);
    if (revisions) return { committed: true, revisions };
    for (const { key, value } of otherwisePut) await this.put(key, value);
    return { committed: false, results: await this.read(reads) };
  }

  close(): void {
    this.client.close();
  }

  /** The new resourceVersion (undefined after a delete), or false if the write's condition failed. */
  private async apply(write: Write, client = this.client): Promise<string | undefined | false> {
    if (changesNothing(write)) {
      // A read, not a transaction's compare: a change landing after it goes unseen (best effort).
      const current = await this.getVia(client, write.key);
      const holds = 'absent' in write ? current === undefined : current?.revision === write.unchanged;
      return holds ? current?.revision : false;
    }
    const { kind, rest } = this.kindOf(write.key);
    const place = kind.place(rest);
    if ('create' in write) {
      const { status, json } = await client.send(
        jsonRequest('POST', collectionPath(kind, place.namespace), resource(kind, place, write.key, write.create)),
        needs('create', kind),
      );
      if (status === 404) return this.absent(kind, json) ?? false;
      return status === 409 ? false : this.remember(write.key, json as KubeObject).revision;
    }
    if ('update' in write) {
      const body = resource(kind, place, write.key, write.update, write.revision);
      const { status, json } = await client.send(jsonRequest('PUT', objectPath(kind, place), body), needs('update', kind));
      if (status === 404) return this.absent(kind, json) ?? false;
      return status === 409 ? false : this.remember(write.key, json as KubeObject).revision;
    }
    const options = { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { resourceVersion: write.revision } };
    const { status, json } = await client.send(jsonRequest('DELETE', objectPath(kind, place), options), needs('delete', kind));
    if (status === 404) return this.absent(kind, json) ?? false;
    if (status === 409) return false;
    return undefined;
  }

  /** Reverses applied writes, newest first, each only if nothing changed it since. */
  private async undo(done: readonly Applied[]): Promise<void> {
    for (const { write, revision, before } of [...done].reverse()) {
      if (changesNothing(write)) continue;
      if ('create' in write) {
        if (revision) await this.apply({ key: write.key, remove: true, revision });
      } else if ('update' in write) {
        if (revision && before && before.revision === write.revision) await this.apply({ key: write.key, update: before.value, revision });
      } else if (before && before.revision === write.revision) {
        await this.apply({ key: write.key, create: before.value });
      }
    }
  }

  /** Creates or replaces `key` whatever its state (a few tries: only its own writer races it). */
  private async put(key: string, value: unknown): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      if ((await this.apply({ key, create: value })) !== false) return;
      const current = await this.get(key);
      if (current && (await this.apply({ key, update: value, revision: current.revision })) !== false) return;
    }
  }

  private async listObjects(kind: Kind, restPrefix: string, keysOnly: boolean): Promise<KubeObject[]> {
    const select = kind.selector(restPrefix);
    // A namespaced kind read under `<namespace>/` lists that namespace; otherwise every namespace.
    const namespace = kind.namespaced && restPrefix.includes('/') ? restPrefix.slice(0, restPrefix.indexOf('/')) : undefined;
    const path = `${collectionPath(kind, namespace)}${select ? `?labelSelector=${encodeURIComponent(select)}` : ''}`;
    const headers = keysOnly ? { Accept: METADATA_ONLY } : undefined;
    const { status, json } = await this.client.send({ method: 'GET', path, ...(headers ? { headers } : {}) }, needs('list', kind));
    if (status === 404) throw notInstalled(kind);
    return (json as { items: KubeObject[] | null }).items ?? []; // an empty metadata-only list has null items
  }

  /**
   * Adds `annotations` to the Kubernetes Node `name` (a merge patch: its others are kept). The
   * datastore's Nodes are the cluster's, so this is the one write to them (datastore migrate import).
   */
  async annotateNode(name: string, annotations: Record<string, string>): Promise<void> {
    const { status } = await this.client.send(
      {
        method: 'PATCH',
        path: `/api/v1/nodes/${encodeURIComponent(name)}`,
        headers: { 'Content-Type': 'application/merge-patch+json' },
        body: Buffer.from(JSON.stringify({ metadata: { annotations } })),
      },
      'patch on nodes',
    );
    if (status === 404) throw new StoreError(`the Kubernetes Node "${name}" does not exist`);
  }

  private kindOf(key: string): { kind: Kind; rest: string } {
    if (key.startsWith(NODES_PREFIX)) {
      throw new StoreError(
        `in the Kubernetes datastore the nodes are the cluster's Node objects; label them with kubectl label node ${key.slice(NODES_PREFIX.length)} key=value`,
      );
    }
    const found = kindOfKey(key);
    if (!found) throw new Error(`no Kubernetes resource holds datastore key ${key}`);
    return found;
  }

  /** A 404: the object is missing (undefined), or the resource type is not installed (thrown). */
  private absent(kind: Kind, json: unknown): undefined {
    if ((json as NotFoundStatus | undefined)?.details?.name === undefined) throw notInstalled(kind);
    return undefined;
  }

  private remember<T>(key: string, object: KubeObject): Entry<T> {
    const revision = object.metadata.resourceVersion ?? '';
    const value = documentOf(key, object);
    this.known.set(key, { revision, value });
    return { key, value: value as T, revision };
  }
}

const collectionPath = (kind: Kind, namespace?: string) =>
  `/apis/${kind.group}/${kind.version}/${namespace !== undefined ? `namespaces/${encodeURIComponent(namespace)}/` : ''}${kind.plural}`;
const objectPath = (kind: Kind, place: { name: string; namespace?: string }) =>
  `${collectionPath(kind, place.namespace)}/${encodeURIComponent(place.name)}`;
const needs = (verb: string, kind: Kind) => `${verb} on ${kind.plural}.${kind.group}`;

function jsonRequest(method: 'POST' | 'PUT' | 'DELETE', path: string, body: unknown) {
  return { method, path, headers: { 'Content-Type': 'application/json' }, body: Buffer.from(JSON.stringify(body)) };
}

function notInstalled(kind: Kind): StoreError {
  return new StoreError(
    `the Kubernetes API has no ${kind.plural}.${kind.group} resource: install netplug's custom resource definitions (deploy/crds/) first`,
  );
}
