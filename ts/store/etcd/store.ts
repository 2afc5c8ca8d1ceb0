// The Store on etcd: a commit is one transaction, its conditions compare revisions (or, for a
// create, that the key has no version yet).
import type { Entry, Store, Write } from '../store.ts';
import { StoreError } from '../store.ts';
import type { Compare, EtcdClient, KeyValue, Operation } from './client.ts';

export class EtcdStore implements Store {
  readonly client: EtcdClient;
  readonly description: string;

  constructor(client: EtcdClient) {
    this.client = client;
    this.description = `etcd at ${client.connection.current.origin}`;
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

  commit(writes: readonly Write[]): Promise<boolean> {
    const compare: Compare[] = [];
    const operations: Operation[] = [];
    for (const write of writes) {
      if ('create' in write) {
        compare.push({ key: write.key, target: 'VERSION', version: '0' });
        operations.push({ put: { key: write.key, value: Buffer.from(JSON.stringify(write.create)) } });
      } else if ('update' in write) {
        compare.push({ key: write.key, target: 'MOD', modRevision: write.revision });
        operations.push({ put: { key: write.key, value: Buffer.from(JSON.stringify(write.update)) } });
      } else {
        compare.push({ key: write.key, target: 'MOD', modRevision: write.revision });
        operations.push({ delete: { key: write.key } });
      }
    }
    return this.client.txn(compare, operations);
  }

  close(): void {
    this.client.connection.close();
  }
}

function entry<T>(kv: KeyValue): Entry<T> {
  try {
    return { key: kv.key, value: JSON.parse(kv.value.toString('utf8')) as T, revision: kv.modRevision };
  } catch {
    throw new StoreError(`the value at ${kv.key} is not JSON`);
  }
}
