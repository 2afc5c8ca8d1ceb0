// netplug's nftables table `inet netplug`, the union of its contributors' parts (a subsystem that
// gives one: NAT's `nat`, policy's `policy`). Main names every contributor of the agent when it
// makes the table: nothing is written until each has given a first part (nft-composer.ts), so a
// restarting agent never writes the table with a part missing. An agent with no contributor
// writes no table, so it deletes the one a previous run left, whose rules no one keeps any more.
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import { NftComposer } from '../../dataplane/nft-composer.ts';
import { NftTable, type NftCounterValue } from '../../dataplane/nftables.ts';
import { compactHeap } from '../../runtime/memory.ts';

const FAMILY = 'inet';
const NAME = 'netplug';
const COMPACT_AFTER_MS = 1000;

export function netplugTable(contributors: readonly string[]): NftComposer {
  // A whole write describes the whole table (tens of MiB at thousands of policies): the heap it
  // grew is given back a moment after it, once the pass that waited for it is done.
  const afterWholeWrite = () => setTimeout(compactHeap, COMPACT_AFTER_MS).unref();
  return new NftComposer({ family: FAMILY, name: NAME, contributors, writer: new NftTable(FAMILY, NAME), afterWholeWrite });
}

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
