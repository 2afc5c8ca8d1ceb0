// One NFLOG group followed for as long as the policy subsystem runs: subscribed at once, and when
// the group cannot be had (another listener holds it), a warning once and another try every
// minute; policy is enforced all the same. Log rules' packets (log-packets.ts) and flow logs
// (record-flows.ts) each follow their group so.
import { subscribeNflog, type NflogPacket, type NflogSubscription } from '../../dataplane/nftables.ts';
import type { Logger } from '../../log/logger.ts';
import { systemClock, type Clock, type Timer } from '../../runtime/clock.ts';
import { describeError } from '../../runtime/errors.ts';

const RETRY_MS = 60_000;

export type Subscribe = (group: number, onPacket: (packet: NflogPacket) => void) => Promise<NflogSubscription>;

export interface NflogFollowing {
  /** Ends the subscription and the retries. */
  stop(): Promise<void>;
}

/**
 * Follows `group`, giving each packet to `onPacket`; `what` names the packets in the log lines
 * (`the packets of Log rules`), `started` is logged once subscribed.
 */
export function followNflog(options: {
  group: number;
  onPacket: (packet: NflogPacket) => void;
  log: Logger;
  what: string;
  started: string;
  clock?: Clock;
  subscribe?: Subscribe;
}): NflogFollowing {
  const { group, onPacket, log, what, clock = systemClock, subscribe = subscribeNflog } = options;
  let subscription: NflogSubscription | undefined;
  let retry: Timer | undefined;
  let stopped = false;
  let warned = false;
  let attempt: Promise<void> = Promise.resolve();
  const start = async () => {
    retry = undefined;
    try {
      const made = await subscribe(group, onPacket);
      if (stopped) {
        await made.stop();
        return;
      }
      subscription = made;
      log.info(options.started);
    } catch (err) {
      if (stopped) return;
      if (!warned)
        log.warning(
          `cannot read ${what} (NFLOG group ${group}): ${describeError(err)}; policy is enforced all the same, trying again every ${RETRY_MS / 1000} s`,
        );
      warned = true;
      retry = clock.after(RETRY_MS, () => {
        attempt = start();
      });
    }
  };
  attempt = start();
  return {
    async stop() {
      stopped = true;
      retry?.cancel();
      await attempt;
      try {
        await subscription?.stop();
      } catch (err) {
        log.warning(`stopping the NFLOG subscription of group ${group}: ${describeError(err)}`);
      }
      subscription = undefined;
    },
  };
}
