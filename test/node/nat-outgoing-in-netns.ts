// Runs netplug-node's natOutgoing (ts/node/nat/nat-outgoing.ts) once in this process's network
// namespace, as the agent runs it in the node's, through the real composer, writer and addon:
// nat-outgoing.test.ts starts it under `ip netns exec`. argv[2] is a JSON list of pools
// ({ name, cidr, natOutgoing }); stdout is the JSON outcome, or { error }.
import { NftComposer } from '../../ts/dataplane/nft-composer.ts';
import { NftTable } from '../../ts/dataplane/nftables.ts';
import type { PoolSpec } from '../../ts/model/ip-pool.ts';
import type { Pool } from '../../ts/ipam/pools.ts';
import { parsePrefix, type Prefix } from '../../ts/net/cidr.ts';
import { NAT_PART, NatOutgoing } from '../../ts/node/nat/nat-outgoing.ts';

const described = JSON.parse(process.argv[2] ?? '[]') as { name: string; cidr: string; natOutgoing: boolean }[];
const pools: Pool[] = described.map(({ name, cidr, natOutgoing }) => {
  const spec: PoolSpec = {
    cidr,
    blockSize: 26,
    nodeSelector: 'all()',
    ipipMode: 'Never',
    vxlanMode: 'Never',
    natOutgoing,
    disabled: false,
  };
  return { name, spec, prefix: parsePrefix(cidr) as Prefix };
});
const tables = new NftComposer({ family: 'inet', name: 'netplug', contributors: [NAT_PART], writer: new NftTable('inet', 'netplug') });
try {
  process.stdout.write(JSON.stringify(await new NatOutgoing(tables).sync(pools)));
} catch (err) {
  process.stdout.write(JSON.stringify({ error: (err as Error).message }));
}
