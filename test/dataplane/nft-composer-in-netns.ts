// Runs calls of ts/dataplane/nft-composer.ts, writing through a real NftTable, in this process's
// network namespace: nft-composer-kernel.test.ts starts it under `ip netns exec`. argv[2] is a
// JSON list of [call, ...arguments] made one after another on one composer of `inet netplug`
// (contributors nat and policy); stdout is a JSON list of { value } or { error: { message } }.
import { NftComposer } from '../../ts/dataplane/nft-composer.ts';
import { NftTable } from '../../ts/dataplane/nftables.ts';
import type { ElementChanges, TablePart } from '../../ts/nft/model.ts';

type Call = [string, ...unknown[]];

const composer = new NftComposer({
  family: 'inet',
  name: 'netplug',
  contributors: ['nat', 'policy'],
  writer: new NftTable('inet', 'netplug'),
});

async function call([name, ...args]: Call): Promise<unknown> {
  switch (name) {
    case 'setPart':
      return composer.setPart(args[0] as string, args[1] as TablePart);
    case 'updatePart':
      return composer.updatePart(args[0] as string, args[1] as TablePart, args[2] as ElementChanges);
    case 'table':
      return composer.table();
    default:
      throw new Error(`unknown call ${name}`);
  }
}

const outcomes: unknown[] = [];
for (const each of JSON.parse(process.argv[2] ?? '[]') as Call[]) {
  try {
    outcomes.push({ value: await call(each) });
  } catch (err) {
    outcomes.push({ error: { message: (err as Error).message } });
  }
}
await composer.close();
process.stdout.write(JSON.stringify(outcomes));
