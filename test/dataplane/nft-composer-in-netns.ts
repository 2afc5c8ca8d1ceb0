// Runs calls of ts/dataplane/nft-composer.ts, writing through a real NftTable, in this process's
// network namespace: nft-composer-kernel.test.ts starts it under `ip netns exec`. argv[2] is a
// JSON list of [call, ...arguments] made one after another on one composer of `inet netplug`
// (contributors nat and policy); stdout is a JSON list of { value } or { error: { message } }.
import { execFileSync } from 'node:child_process';

import { type GiveOptions, NftComposer } from '../../ts/dataplane/nft-composer.ts';
import { NftTable } from '../../ts/dataplane/nftables.ts';
import type { ElementChanges, TablePart } from '../../ts/nft/model.ts';
import { nftBinary } from '../helpers/kernel.ts';

type Call = [string, ...unknown[]];

const table = new NftTable('inet', 'netplug');
/** How the table was written: whole, by difference, refused differences, element batches. */
const writes = { whole: 0, delta: 0, deltaRefused: 0, elements: 0 };
const composer = new NftComposer({
  family: 'inet',
  name: 'netplug',
  contributors: ['nat', 'policy'],
  writer: {
    apply: (t) => {
      writes.whole++;
      return table.apply(t);
    },
    applyDelta: (d) =>
      table.applyDelta(d).then(
        (report) => {
          writes.delta++;
          return report;
        },
        (err: unknown) => {
          writes.deltaRefused++;
          throw err;
        },
      ),
    updateElements: (c) => {
      writes.elements++;
      return table.updateElements(c);
    },
  },
});

async function call([name, ...args]: Call): Promise<unknown> {
  switch (name) {
    case 'setPart':
      return composer.setPart(args[0] as string, args[1] as TablePart, args[2] as GiveOptions | undefined);
    case 'updatePart':
      return composer.updatePart(args[0] as string, args[1] as TablePart, args[2] as ElementChanges);
    case 'nft':
      // A hand change between calls (`nft add chain ...`): someone else's change to the table.
      execFileSync(nftBinary(), args as string[]);
      return 'done';
    case 'writes':
      return { ...writes };
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
