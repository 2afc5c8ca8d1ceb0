// The agent's datastore connections for the CNI commands it serves. On etcd, and on the
// Kubernetes API over HTTP/2 (ts/net/http2-client.ts), one connection carries every command's
// requests at once. Where the API must be reached over HTTP/1.1 (through a proxy), a connection
// carries one request at a time (ts/net/http-client.ts), so a burst of pods on one node would
// queue behind it: the agent then keeps a few and lends each command the least busy one for its
// whole life. A connection opens its socket only on first use, so idle ones cost nothing.
// On the Kubernetes datastore each command gets a store of its own over the lent client: a
// KubeStore remembers what it read for undoing a failed commit, which is per command (and would
// otherwise grow for as long as the agent runs). Over HTTP/1.1 the other connections are its
// spares: a commit's writes before the last go out at once over them.
import { KubeStore } from '../../store/kubernetes/store.ts';
import type { Read, Store, Write } from '../../store/store.ts';

/**
 * Connections kept per datastore at most: on the Kubernetes API over HTTP/1.1 (one request at a
 * time per connection), enough that 100 concurrent ADDs do not wait on one; over HTTP/2, and on
 * etcd (gRPC), one carries every call's requests at once (more would only multiply the server's
 * connections by the nodes).
 */
export const CNI_CONNECTIONS = { kubernetes: 8, etcdv3: 1 } as const;

interface Member {
  store: Store;
  lent: number;
}

export class StorePool {
  private readonly members: Member[];
  private readonly wrap: (store: Store) => Store;

  /** `stores`: open stores, each on a connection of its own; `wrap` applies to each store lent (metrics). */
  constructor(stores: readonly Store[], wrap: (store: Store) => Store = (store) => store) {
    if (stores.length === 0) throw new Error('no stores');
    this.members = stores.map((store) => ({ store, lent: 0 }));
    this.wrap = wrap;
  }

  get description(): string {
    return (this.members[0] as Member).store.description;
  }

  /** Commands currently holding a connection of the pool. */
  get lent(): number {
    return this.members.reduce((sum, m) => sum + m.lent, 0);
  }

  /** A store for one command over the least busy connection; its close() gives the connection back. */
  lend(): Store {
    const member = this.members.reduce((best, m) => (m.lent < best.lent ? m : best));
    member.lent++;
    // On the Kubernetes API the other connections carry the writes a commit sends at once (see KubeStore).
    const store =
      member.store instanceof KubeStore
        ? new KubeStore(
            member.store.client,
            this.members.flatMap((m) => (m !== member && m.store instanceof KubeStore ? [m.store.client] : [])),
          )
        : member.store;
    return new LentStore(this.wrap(store), () => member.lent--);
  }

  /** Closes every connection (the agent stops). */
  close(): void {
    for (const { store } of this.members) store.close();
  }
}

/** A store lent to one command: every call goes to its connection; close() returns it, once. */
class LentStore implements Store {
  readonly description: string;
  readonly transactional: boolean;
  private readonly inner: Store;
  private giveBack: (() => void) | undefined;

  constructor(inner: Store, giveBack: () => void) {
    this.inner = inner;
    this.description = inner.description;
    this.transactional = inner.transactional;
    this.giveBack = giveBack;
  }

  get<T>(key: string) {
    return this.inner.get<T>(key);
  }

  list<T>(prefix: string) {
    return this.inner.list<T>(prefix);
  }

  listKeys(prefix: string) {
    return this.inner.listKeys(prefix);
  }

  read<const R extends readonly Read[]>(reads: R) {
    return this.inner.read(reads);
  }

  /** Nothing: the agent's connections stay open between commands, and a warm-up request would queue before the command's own. */
  warmUp(): void {}

  commit(writes: readonly Write[]) {
    return this.inner.commit(writes);
  }

  commitElseRead(writes: readonly Write[], reads: readonly Read[], otherwisePut?: readonly { key: string; value: unknown }[]) {
    return this.inner.commitElseRead(writes, reads, otherwisePut);
  }

  close(): void {
    this.giveBack?.();
    this.giveBack = undefined;
  }
}
