// netplug's nftables table `inet netplug`, the union of its contributors' parts (a subsystem that
// gives one: NAT's `nat`, policy's `policy`). Main names every contributor of the agent when it
// makes the table: nothing is written until each has given a first part (nft-composer.ts), so a
// restarting agent never writes the table with a part missing. An agent with no contributor
// writes no table, so it deletes the one a previous run left, whose rules no one keeps any more.
import { readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { type ComposedTableWriter, NftComposer } from '../../dataplane/nft-composer.ts';
import { type NftApplyReport, NftTable, type NftCounterValue } from '../../dataplane/nftables.ts';
import { compactHeap } from '../../runtime/memory.ts';

const FAMILY = 'inet';
const NAME = 'netplug';
const COMPACT_AFTER_MS = 1000;

/**
 * The composer of netplug's table. `keptPath`: where the writer keeps its last commit between runs
 * (in the agent's run directory, beside its CNI socket: gone with the table at a reboot), so that
 * a restarted agent writes only what changed while it was stopped.
 */
export function netplugTable(contributors: readonly string[], keptPath: string, log: TableLog): NftComposer {
  // A whole write describes the whole table (tens of MiB at thousands of policies): the heap it
  // grew is given back a moment after it, once the pass that waited for it is done.
  const afterWholeWrite = () => setTimeout(compactHeap, COMPACT_AFTER_MS).unref();
  const table = new NftTable(FAMILY, NAME, keptPath);
  let first = true;
  const writer: ComposedTableWriter = {
    // The first write says whether the run took over what the previous one kept.
    apply: async (description) => {
      const report = await table.apply(description);
      if (first) log.info(firstWrite(report));
      first = false;
      return report;
    },
    applyDelta: (delta) => table.applyDelta(delta),
    updateElements: (changes) => table.updateElements(changes),
    keep: () => table.keep(),
  };
  return new NftComposer({
    family: FAMILY,
    name: NAME,
    contributors,
    writer,
    afterWholeWrite,
    keepFailed: (err) =>
      log.warning(`cannot keep ${FAMILY} ${NAME} for the next start (that one will write it whole): ${(err as Error).message}`),
  });
}

export interface TableLog {
  info(text: string): void;
  warning(text: string): void;
}

function firstWrite(report: NftApplyReport): string {
  if (report.replaced) return `nftables table ${FAMILY} ${NAME} written whole (${report.operations} messages)`;
  return `nftables table ${FAMILY} ${NAME} taken over as the previous run kept it: ${report.operations} messages of changes`;
}

/** Where netplug-node keeps its table's last commit, beside its CNI socket `agentSocket`. */
export const keptTablePath = (agentSocket: string): string => join(dirname(agentSocket), 'nftables', `${FAMILY}-${NAME}.json`);

/**
 * Reads the named counters of netplug's table (policy's drop counters), through a handle of its
 * own: a read waits for no write of the composer's writer.
 */
export function netplugCounters(): () => Promise<Map<string, NftCounterValue>> {
  const reader = new NftTable(FAMILY, NAME);
  return () => reader.counters();
}

/** Deletes netplug's table if a previous run left it; says whether it did. */
export function removeNetplugTable(): Promise<boolean> {
  return new NftTable(FAMILY, NAME).remove();
}

/**
 * Deletes the endpoint status files under `prefix` (what the policy subsystem wrote when it ran):
 * without enforcement no pod's policy is programmed, and a file left would say it is. Returns
 * their names.
 */
export function removeEndpointStatusFiles(prefix: string): string[] {
  const directory = join(prefix, 'endpoint-status');
  let names: string[];
  try {
    names = readdirSync(directory);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  for (const name of names) rmSync(join(directory, name), { force: true, recursive: true });
  return names;
}
