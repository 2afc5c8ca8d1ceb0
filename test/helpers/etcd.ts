// etcd for the tests: scripts/lib/etcd-server.ts, in a temporary directory, stopped at teardown.
import type { ExecutionContext } from 'ava';

import { launchEtcd, type EtcdOptions, type EtcdServer } from '../../scripts/lib/etcd-server.ts';
import { tempDir } from './cni.ts';

export { freePort, type EtcdCerts, type EtcdServer } from '../../scripts/lib/etcd-server.ts';

export async function startEtcd(t: Pick<ExecutionContext, 'teardown'>, options: EtcdOptions = {}): Promise<EtcdServer> {
  const server = await launchEtcd(tempDir(t, 'etcd'), options);
  t.teardown(() => server.stop());
  return server;
}
