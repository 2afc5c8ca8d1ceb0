// The agent's datastore, counted: each request (get, list, listKeys, read, commit, commitElseRead)
// adds to netplug_datastore_requests_total, and a request that throws (unreachable, refused,
// timed out) to netplug_datastore_request_errors_total (datastore-metrics.ts). A commit that loses
// its compare-and-swap answered: it is a request, not an error.
import type { Read, Store, Write } from '../../store/store.ts';
import type { DatastoreMetrics } from './datastore-metrics.ts';

export function countingStore(store: Store, metrics: Pick<DatastoreMetrics, 'countDatastore'>): Store {
  const counted = async <T>(operation: string, request: () => Promise<T>): Promise<T> => {
    try {
      const answer = await request();
      metrics.countDatastore(operation, false);
      return answer;
    } catch (err) {
      metrics.countDatastore(operation, true);
      throw err;
    }
  };
  return {
    get description() {
      return store.description;
    },
    get transactional() {
      return store.transactional;
    },
    get: (key) => counted('get', () => store.get(key)),
    list: (prefix) => counted('list', () => store.list(prefix)),
    listKeys: (prefix) => counted('listKeys', () => store.listKeys(prefix)),
    read: <const R extends readonly Read[]>(reads: R) => counted('read', () => store.read(reads)),
    warmUp: () => store.warmUp(),
    commit: (writes: readonly Write[]) => counted('commit', () => store.commit(writes)),
    commitElseRead: (writes, reads, otherwisePut) => counted('commitElseRead', () => store.commitElseRead(writes, reads, otherwisePut)),
    close: () => store.close(),
    // Following is a watch, not requests: not counted.
    ...(store.follow ? { follow: store.follow.bind(store) } : {}),
  };
}
