// The default IPv6 pool netplug-node creates for a dual-stack cluster (in this process, against a
// real etcd and kube-apiserver): NETPLUG_IPV6POOL_CIDR, with its block size, natOutgoing and VXLAN, makes
// default-ipv6-ippool beside the IPv4 one, once (a later start with another CIDR leaves it); no
// variable, no IPv6 pool; a bad value is named before anything is written.
import test, { type ExecutionContext } from 'ava';

import { keys } from '../../ts/model/keys.ts';
import type { PoolResource } from '../../ts/model/ip-pool.ts';
import { checkDefaultPool } from '../../ts/node/startup/ensure-default-pool.ts';
import { nodeSettings } from '../../ts/node/shared/settings.ts';
import { openStore } from '../../ts/store/open.ts';
import { type EtcdServer, startEtcd } from '../helpers/etcd.ts';
import { type Kube, startKube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { NODE_AGENT_RULES, ready, readVarFile, startAgent } from './agent.ts';

let kube: Kube;
let agentKubeconfig: string;
const shared = sharedTeardowns(test);

test.before(async () => {
  kube = await startKube(shared);
  agentKubeconfig = (await kube.identityWith('netplug-node-default-ipv6', NODE_AGENT_RULES)).kubeconfig;
});

const env = (etcd: EtcdServer, extra: Record<string, string>) => ({
  NODENAME: 'node-v6',
  DATASTORE_TYPE: 'etcdv3',
  ETCD_ENDPOINTS: etcd.endpoints,
  KUBECONFIG: agentKubeconfig,
  NETPLUG_IPV4POOL_CIDR: '10.123.0.0/16',
  ...extra,
});

async function poolsIn(t: ExecutionContext, etcd: EtcdServer) {
  const store = await openStore({ etcd_endpoints: etcd.endpoints });
  t.teardown(() => store.close());
  return (await store.list<PoolResource>(keys.pools)).map(({ value: { metadata, spec } }) => ({
    name: metadata.name,
    cidr: spec.cidr,
    blockSize: spec.blockSize,
    natOutgoing: spec.natOutgoing,
    vxlanMode: spec.vxlanMode,
    ipipMode: spec.ipipMode,
  }));
}

test('NETPLUG_IPV6POOL_CIDR: default-ipv6-ippool beside the IPv4 one (blocks of /122, no natOutgoing, no encapsulation), created once', async (t) => {
  const etcd = await startEtcd(t);
  const first = await startAgent(t, env(etcd, { NETPLUG_IPV6POOL_CIDR: 'fd00:10:244::/56' }));
  await ready(first);
  const v4 = {
    name: 'default-ipv4-ippool',
    cidr: '10.123.0.0/16',
    blockSize: 26,
    natOutgoing: true,
    vxlanMode: 'CrossSubnet',
    ipipMode: 'Never',
  };
  const v6 = {
    name: 'default-ipv6-ippool',
    cidr: 'fd00:10:244::/56',
    blockSize: 122,
    natOutgoing: false,
    vxlanMode: 'Never',
    ipipMode: 'Never',
  };
  t.deepEqual(await poolsIn(t, etcd), [v4, v6]);
  t.is(await first.stop(), 0);
  // Started again with another CIDR: an IPv6 pool exists, it stays as it is.
  const again = await startAgent(t, env(etcd, { NETPLUG_IPV6POOL_CIDR: 'fd00:99::/48' }));
  await ready(again);
  t.deepEqual(await poolsIn(t, etcd), [v4, v6]);
  t.is(await again.stop(), 0);
});

test('the block size, natOutgoing and VXLAN follow their variables; without NETPLUG_IPV6POOL_CIDR, or with NO_DEFAULT_POOLS, no IPv6 pool', async (t) => {
  const etcd = await startEtcd(t);
  const agent = await startAgent(
    t,
    env(etcd, {
      NETPLUG_IPV6POOL_CIDR: 'fd00:10:245::/56',
      NETPLUG_IPV6POOL_BLOCK_SIZE: '120',
      NETPLUG_IPV6POOL_NAT_OUTGOING: 'true',
      NETPLUG_IPV6POOL_VXLAN: 'CrossSubnet',
    }),
  );
  await ready(agent);
  t.like((await poolsIn(t, etcd))[1], {
    name: 'default-ipv6-ippool',
    cidr: 'fd00:10:245::/56',
    blockSize: 120,
    natOutgoing: true,
    vxlanMode: 'CrossSubnet',
    ipipMode: 'Never',
  });
  t.is(await agent.stop(), 0);

  const single = await startEtcd(t);
  const v4Only = await startAgent(t, env(single, {}));
  await ready(v4Only);
  t.deepEqual(
    (await poolsIn(t, single)).map((pool) => pool.name),
    ['default-ipv4-ippool'],
  );
  t.is(await v4Only.stop(), 0);

  const bare = await startEtcd(t);
  const none = await startAgent(t, env(bare, { NETPLUG_IPV6POOL_CIDR: 'fd00:10:246::/56', NO_DEFAULT_POOLS: 'true' }));
  await ready(none);
  t.deepEqual(await poolsIn(t, bare), []);
  t.is(await none.stop(), 0);
});

test('bad IPv6 pool settings are named, and stop the agent before it writes anything', async (t) => {
  t.throws(() => nodeSettings({ NODENAME: 'n1', NETPLUG_IPV6POOL_CIDR: '10.0.0.0/8' }), {
    message: 'NETPLUG_IPV6POOL_CIDR "10.0.0.0/8" is not an IPv6 CIDR such as fd00:10:244::/56',
  });
  t.throws(() => nodeSettings({ NODENAME: 'n1', NETPLUG_IPV6POOL_VXLAN: 'Sometimes' }), {
    message: 'NETPLUG_IPV6POOL_VXLAN "Sometimes" must be Never or Always or CrossSubnet',
  });
  t.throws(() => nodeSettings({ NODENAME: 'n1', NETPLUG_IPV6POOL_NAT_OUTGOING: 'yes' }), {
    message: 'NETPLUG_IPV6POOL_NAT_OUTGOING "yes" must be true or false',
  });
  t.throws(
    () => checkDefaultPool(nodeSettings({ NODENAME: 'n1', NETPLUG_IPV6POOL_CIDR: 'fd00::/56', NETPLUG_IPV6POOL_BLOCK_SIZE: '130' })),
    {
      message: /^the default IPv6 pool: NETPLUG_IPV6POOL_BLOCK_SIZE 130 must be a whole number from \d+ to 128 for an IPv6 pool$/,
    },
  );
  const agent = await startAgent(t, { NODENAME: 'node-x', NETPLUG_IPV6POOL_CIDR: 'fd00::/56', NETPLUG_IPV6POOL_BLOCK_SIZE: '40' });
  t.is(await agent.stop(), 1);
  t.throws(() => readVarFile(agent, 'nodename'), { code: 'ENOENT' });
});
