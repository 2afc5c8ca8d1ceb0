// Runs calls of ts/dataplane/nftables.ts in this process's network namespace, as netplug-node
// runs them in the node's: nftables.test.ts starts it under `ip netns exec`. argv[2] is a JSON
// list of [call, ...arguments] made one after another on one NftTable('inet', 'netplug') (keeping
// its commits in the file argv[3] when given); stdout is a JSON list of { value } or
// { error: { name, code, op, message } }.
import { spawnSync } from 'node:child_process';

import { NftTable, removeIptablesChain, subscribeNflog, type NflogPacket } from '../../ts/dataplane/nftables.ts';
import type { ElementChanges, Table } from '../../ts/nft/model.ts';

type Call = [string, ...unknown[]];

const table = new NftTable('inet', 'netplug', process.argv[3]);

async function call([name, ...args]: Call): Promise<unknown> {
  switch (name) {
    case 'apply':
      return table.apply(args[0] as Table);
    case 'updateElements':
      return table.updateElements(args[0] as ElementChanges);
    case 'counters':
      return Object.fromEntries(await table.counters());
    case 'remove':
      return table.remove();
    case 'keep':
      return table.keep();
    case 'removeIptablesChain':
      return (await removeIptablesChain(args[0] as string, args[1] as string)) ?? null;
    case 'nflog': {
      // Subscribes to a group, runs a command, returns the packets logged (at least `expect`).
      const [group, command, expect] = args as [number, string[], number];
      const packets: NflogPacket[] = [];
      let enough = () => {};
      const arrived = new Promise<void>((resolve) => {
        enough = resolve;
      });
      const subscription = await subscribeNflog(group, (packet) => {
        packets.push(packet);
        if (packets.length >= expect) enough();
      });
      spawnSync(command[0] as string, command.slice(1));
      await Promise.race([arrived, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
      await subscription.stop();
      return packets;
    }
    default:
      throw new Error(`unknown call ${name}`);
  }
}

const outcomes: unknown[] = [];
for (const each of JSON.parse(process.argv[2] ?? '[]') as Call[]) {
  try {
    outcomes.push({ value: await call(each) });
  } catch (err) {
    const { name: kind, code, op, message } = err as Error & { code?: string; op?: string };
    outcomes.push({ error: { name: kind, code, op, message } });
  }
}
process.stdout.write(JSON.stringify(outcomes));
