// The Store on etcd: a commit is one transaction, its conditions compare revisions (or, for a
// create or an absent key, that the key has no version yet); a condition-only write is a compare
// with no operation.
import type { Committed, Entry, FollowEvents, Following, Read, ReadResult, Store, Write } from '../store.ts';
import { StoreDocumentError } from '../store.ts';
import type { Compare, KeyValue, KvClient, Operation, RangeRequest } from './client.ts';

export class EtcdStore implements Store {
  readonly client: KvClient;
  readonly description: string;
  readonly transactional = true;

  readonly follow?: (prefix: string, events: FollowEvents) => Following;

  constructor(client: KvClient) {
    this.client = client;
    this.description = `etcd at ${client.origin}`;
    const watch = client.watchPrefix?.bind(client);
    // A document that is not JSON fails the list or change it comes in, as it fails a read.
    if (watch)
      this.follow = (prefix, events) =>
        watch(prefix, {
          listed: (kvs) => {
            let entries: Entry<unknown>[];
            try {
              entries = kvs.map((kv) => entry(kv));
            } catch (err) {
              return events.failed(err as Error);
            }
            events.listed(entries);
          },
          put: (kv) => {
            try {
              events.changed(entry(kv));
            } catch (err) {
              events.failed(err as Error);
            }
          },
          deleted: (key) => events.removed(key),
          failed: (err) => events.failed(err),
        });
  }

  async get<T>(key: string): Promise<Entry<T> | undefined> {
    const [kv] = await this.client.range(key);
    return kv ? entry<T>(kv) : undefined;
  }

  async list<T>(prefix: string): Promise<Entry<T>[]> {
    return (await this.client.range(prefix, { prefix: true })).map((kv) => entry<T>(kv));
  }

  async listKeys(prefix: string): Promise<string[]> {
    return (await this.client.range(prefix, { prefix: true, keysOnly: true })).map((kv) => kv.key);
  }

  async read<const R extends readonly Read[]>(reads: R): Promise<{ -readonly [I in keyof R]: ReadResult<R[I]> }> {
    const answers = await this.client.ranges(reads.map(rangeOf));
    return reads.map((r, i) => resultOf(r, answers[i] ?? [])) as { -readonly [I in keyof R]: ReadResult<R[I]> };
  }

  warmUp(): void {
    this.client.warmUp();
  }

  async commit(writes: readonly Write[]): Promise<boolean> {
    return (await this.commitElseRead(writes, [])).committed;
  }

  async commitElseRead(
    writes: readonly Write[],
    reads: readonly Read[],
    otherwisePut: readonly { key: string; value: unknown }[] = [],
  ): Promise<Committed | { committed: false; results: unknown[] }> {
    const compare: Compare[] = [];
    const operations: Operation[] = [];
    for (const write of writes) {
      if ('create' in write) {
        compare.push({ key: write.key, target: 'VERSION', version: '0' });
        operations.push({ put: { key: write.key, value: Buffer.from(JSON.stringify(write.create)) } });
      } else if ('update' in write) {
        compare.push({ key: write.key, target: 'MOD', modRevision: write.revision });
        operations.push({ put: { key: write.key, value: Buffer.from(JSON.stringify(write.update)) } });
      } else if ('unchanged' in write) {
        compare.push({ key: write.key, target: 'MOD', modRevision: write.unchanged });
      } else if ('absent' in write) {
        compare.push({ key: write.key, target: 'VERSION', version: '0' });
      } else {
        compare.push({ key: write.key, target: 'MOD', modRevision: write.revision });
        operations.push({ delete: { key: write.key } });
      }
    }
    const puts = otherwisePut.map(({ key, value }) => ({ put: { key, value: Buffer.from(JSON.stringify(value)) } }));
    const { succeeded, ranges, revision } = await this.client.txnElseRange(compare, operations, reads.map(rangeOf), puts);
    if (!succeeded) return { committed: false, results: reads.map((r, i) => resultOf(r, ranges[i] ?? [])) };
    // Every key a transaction puts takes the transaction's revision as its mod_revision.
    const revisions: Record<string, string> = {};
    for (const o of operations) if ('put' in o) revisions[o.put.key] = revision;
    return { committed: true, revisions };
  }

  close(): void {
    this.client.close();
  }
}

function rangeOf(read: Read): RangeRequest {
  return 'get' in read
    ? { key: read.get }
    : 'list' in read
      ? { key: read.list, prefix: true }
      : { key: read.keys, prefix: true, keysOnly: true };
}

function resultOf(read: Read, kvs: readonly KeyValue[]): unknown {
  if ('get' in read) return kvs[0] ? entry(kvs[0]) : undefined;
  return 'list' in read ? kvs.map((kv) => entry(kv)) : kvs.map((kv) => kv.key);
}

function entry<T>(kv: KeyValue): Entry<T> {
  try {
    return { key: kv.key, value: JSON.parse(kv.value.toString('utf8')) as T, revision: kv.modRevision };
  } catch {
    throw new StoreDocumentError(`the datastore's document at ${kv.key} is not JSON; repair or remove it`);
  }
}
