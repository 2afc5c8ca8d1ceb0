// Fixtures a whole test file shares (a kube-apiserver, an etcd), made in a before hook and
// removed after every test: ava allows no t.teardown in hooks, so the hook gets this instead.
import type { ExecutionContext, TestFn } from 'ava';

export type Teardowns = Pick<ExecutionContext, 'teardown'>;

export function sharedTeardowns(test: TestFn): Teardowns {
  const cleanups: Array<() => unknown> = [];
  test.after.always(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  return { teardown: (cleanup: () => unknown) => void cleanups.push(cleanup) } as Teardowns;
}
