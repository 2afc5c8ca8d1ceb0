// netplug's nftables table `inet netplug`, the union of its contributors' parts (a subsystem that
// gives one: NAT's `nat`, policy's `policy`). Main names every contributor of the agent when it
// makes the table: nothing is written until each has given a first part (nft-composer.ts), so a
// restarting agent never writes the table with a part missing.
import { NftComposer } from '../../dataplane/nft-composer.ts';
import { NftTable } from '../../dataplane/nftables.ts';

export function netplugTable(contributors: readonly string[]): NftComposer {
  return new NftComposer({ family: 'inet', name: 'netplug', contributors, writer: new NftTable('inet', 'netplug') });
}
