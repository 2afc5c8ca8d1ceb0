// The etcd settings netplug-node and netplug-kube-controllers take from their environment: the
// netconf's pairs refused as the plugin refuses them (ETCD_ENDPOINTS with ETCD_DISCOVERY_SRV,
// naming both), and the deprecated ETCD_AUTHORITY and ETCD_SCHEME still reaching a real etcd, with
// a deprecation that says what to set instead.
import test from 'ava';

import { controllersSettings } from '../../ts/controllers/settings.ts';
import { nodeSettings } from '../../ts/node/shared/settings.ts';
import { openGrpcStore } from '../../ts/store/etcd/grpc.ts';
import { etcdFromEnvironment } from '../../ts/store/etcd/environment.ts';
import { openStore } from '../../ts/store/open.ts';
import { startEtcd } from '../helpers/etcd.ts';

const both = { ETCD_ENDPOINTS: 'http://127.0.0.1:2379', ETCD_DISCOVERY_SRV: 'example.com' };
const conflict = {
  message: 'ETCD_ENDPOINTS "http://127.0.0.1:2379" and ETCD_DISCOVERY_SRV "example.com" cannot be used together: set one of them',
};

test('ETCD_ENDPOINTS with ETCD_DISCOVERY_SRV is refused by both programs, naming both', (t) => {
  t.throws(() => nodeSettings({ NODENAME: 'n1', ...both }), conflict);
  t.throws(() => controllersSettings(both), conflict);
  // Either alone is taken.
  t.deepEqual(nodeSettings({ NODENAME: 'n1', ETCD_DISCOVERY_SRV: 'example.com' }).etcd, {
    datastore_type: 'etcdv3',
    etcd_discovery_srv: 'example.com',
  });
  t.is(controllersSettings({ ETCD_ENDPOINTS: both.ETCD_ENDPOINTS }).datastore.etcd_endpoints, both.ETCD_ENDPOINTS);
});

test('ETCD_AUTHORITY and ETCD_SCHEME are deprecated: taken, with a deprecation that says what to set', (t) => {
  t.deepEqual(etcdFromEnvironment({ ETCD_AUTHORITY: 'e:2379', ETCD_SCHEME: 'https' } as never), {
    etcd: { etcd_authority: 'e:2379', etcd_scheme: 'https' },
    deprecation: 'ETCD_AUTHORITY "e:2379" and ETCD_SCHEME "https" are deprecated: set ETCD_ENDPOINTS=https://e:2379 instead',
  });
  t.is(
    etcdFromEnvironment({ ETCD_AUTHORITY: 'e:2379' } as never).deprecation,
    'ETCD_AUTHORITY "e:2379" is deprecated: set ETCD_ENDPOINTS=http://e:2379 instead',
  );
  t.is(
    etcdFromEnvironment({ ETCD_SCHEME: 'http', ETCD_DISCOVERY_SRV: 'example.com' } as never).deprecation,
    'ETCD_SCHEME "http" is deprecated and ignored: ETCD_DISCOVERY_SRV is set; remove ETCD_SCHEME',
  );
  t.is(etcdFromEnvironment({ ETCD_ENDPOINTS: 'http://e:2379' } as never).deprecation, undefined);
  t.throws(() => nodeSettings({ NODENAME: 'n1', ETCD_SCHEME: 'ftp' }), { message: 'ETCD_SCHEME "ftp" must be http or https' });
  // Said on the etcd datastore only.
  t.is(
    nodeSettings({ NODENAME: 'n1', ETCD_AUTHORITY: 'e:2379' }).etcdDeprecation,
    'ETCD_AUTHORITY "e:2379" is deprecated: set ETCD_ENDPOINTS=http://e:2379 instead',
  );
  t.is(nodeSettings({ NODENAME: 'n1', DATASTORE_TYPE: 'kubernetes', ETCD_AUTHORITY: 'e:2379' }).etcdDeprecation, undefined);
  t.truthy(controllersSettings({ ETCD_AUTHORITY: 'e:2379' }).etcdDeprecation);
});

test('ETCD_AUTHORITY and ETCD_SCHEME reach a real etcd from both programs’ settings', async (t) => {
  const etcd = await startEtcd(t);
  const env = { ETCD_AUTHORITY: `127.0.0.1:${etcd.port}`, ETCD_SCHEME: 'http' };
  const agentStore = await openGrpcStore(nodeSettings({ NODENAME: 'n1', ...env }).etcd);
  t.teardown(() => agentStore.close());
  const controllersStore = await openStore(controllersSettings(env).datastore);
  t.teardown(() => controllersStore.close());
  t.true(await agentStore.commit([{ key: '/netplug/test/authority', create: { written: 'by the agent' } }]));
  t.deepEqual((await controllersStore.get('/netplug/test/authority'))?.value, { written: 'by the agent' });
});
