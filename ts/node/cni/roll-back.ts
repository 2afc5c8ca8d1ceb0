// A command through the plugin's core as netplug-node serves it (runCommand), and the roll-back
// at start of the ADDs a previous run left unfinished (its journal, inflight-journal.ts): each is
// undone by a DEL through the same core before the agent serves again, unless its namespace is
// not visible here (see rollBack).
import { existsSync } from 'node:fs';

import type { Logger } from '../../log/logger.ts';
import { retry } from '../../runtime/backoff.ts';
import { describeError } from '../../runtime/errors.ts';
import { runMain, type MainIo, type MainOutcome } from '../../plugin/main.ts';
import type { PluginServices } from '../../plugin/services.ts';
import type { CniRequest } from './decline.ts';
import type { InflightJournal } from './inflight-journal.ts';

/** Between rounds of rolling back unfinished ADDs that failed (the datastore away, say): 1 s doubling to 30 s. */
const ROLLBACK_BACKOFF = { initialMs: 1_000, maxMs: 30_000, jitter: 0.1 };

/** A round left some ADDs not rolled back (each failure is logged on its own). */
class NotRolledBack extends Error {}

export interface RollBackOptions {
  services: PluginServices;
  log: Logger;
  signal: AbortSignal;
  /** Where the plugin's log lines of roll-backs go (the agent's stderr). */
  echo?: (text: string) => void;
}

/** runMain, and an internal error (as the one-shot's last resort gives) if it throws all the same. */
export async function runCommand(io: MainIo, program: CniRequest['program'], services: PluginServices): Promise<MainOutcome> {
  try {
    return await runMain(io, program, services);
  } catch (err) {
    const msg = `internal error: ${err instanceof Error ? err.message : String(err)}`;
    return { stdout: `${JSON.stringify({ cniVersion: '1.1.0', code: 999, msg }, null, 4)}\n`, exitCode: 1 };
  }
}

/**
 * DEL, through the same core, of every ADD a previous run left unfinished whose namespace is visible
 * here; each entry removed once its DEL succeeds. Failed ones are tried again until they succeed
 * or the agent stops.
 */
export async function rollBack(journal: InflightJournal, options: RollBackOptions): Promise<void> {
  const { log, services, signal } = options;
  const echo = options.echo ?? ((text: string) => process.stderr.write(text));
  const round = async (): Promise<void> => {
    const left = journal.leftBehind();
    if (left.length === 0) return;
    log.info(`rolling back ${left.length} ADD(s) a previous run left unfinished`);
    const outcomes = await Promise.all(
      left.map(async ({ path, entry }) => {
        const env: Record<string, string> = { ...entry.env, CNI_COMMAND: 'DEL' };
        // Served with the namespace the shim sent, which this run cannot see: a DEL here would
        // take the namespace for gone and free addresses its interface may still hold. The
        // runtime's DEL, which follows the failure the shim reported, undoes the ADD instead.
        const netns = env['CNI_NETNS'];
        if (netns && !existsSync(netns)) {
          journal.remove(path);
          log.info("an unfinished ADD is left to the runtime's DEL: its network namespace is not visible here", {
            container: env['CNI_CONTAINERID'],
            netns,
          });
          return true;
        }
        const outcome = await runCommand({ env, readStdin: () => entry.stdin, stderr: echo, pid: entry.pid }, entry.program, services);
        const fields = { container: env['CNI_CONTAINERID'], interface: env['CNI_IFNAME'] };
        if (outcome.exitCode !== 0) {
          log.warning(`rolling back an unfinished ADD failed; trying again: ${outcome.stdout.trim()}`, fields);
          return false;
        }
        journal.remove(path);
        log.info('rolled back an unfinished ADD', fields);
        return true;
      }),
    );
    if (!outcomes.every(Boolean)) throw new NotRolledBack();
  };
  await retry(round, {
    signal,
    backoff: ROLLBACK_BACKOFF,
    failed: (err, delayMs) => {
      if (!(err instanceof NotRolledBack))
        log.warning(`rolling back unfinished ADDs: ${describeError(err)}; trying again in ${(delayMs / 1000).toFixed(1)} s`);
    },
  });
}
