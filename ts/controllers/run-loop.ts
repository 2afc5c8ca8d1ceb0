// One controller's reconcile loop: a pass on every trigger (its watch's first complete list, an
// informer's change) and every `periodMs` besides (level-triggered: a pass reads the whole state, so a missed event is
// made up by the next pass). Passes never overlap; a failed pass is logged and retried.
import { reason, type ControllerLog } from './log.ts';

export interface Loop {
  readonly name: string;
  /** Successful passes so far. */
  passes(): number;
  /** Asks for a pass soon. */
  trigger(): void;
  /** Resolves when the loop has stopped (after `signal` aborted and the running pass ended). */
  finished: Promise<void>;
}

/** Triggers that come in a burst (a relist) give one pass. */
const SETTLE_MS = 50;

/** `reconcile` resolves to how soon the next pass should come at the latest (ms), when sooner than the period. */
export function runLoop(
  name: string,
  reconcile: () => Promise<number | undefined>,
  periodMs: number,
  signal: AbortSignal,
  log: ControllerLog,
): Loop {
  let passes = 0;
  let wake: (() => void) | undefined;
  let pending = false;
  const trigger = () => {
    pending = true;
    wake?.();
  };
  signal.addEventListener('abort', trigger, { once: true });
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      let settled = false;
      const timer = setTimeout(done, ms);
      function done() {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = () => setTimeout(done, SETTLE_MS);
    });

  const finished = (async () => {
    let lastError = '';
    let next = periodMs;
    while (!signal.aborted) {
      if (!pending) await sleep(next);
      if (signal.aborted) break;
      pending = false;
      try {
        next = Math.min(periodMs, (await reconcile()) ?? periodMs);
        passes++;
        if (lastError) log.info(`${name} controller: pass succeeded again`);
        lastError = '';
      } catch (err) {
        // The same failure pass after pass is logged once.
        const text = reason(err);
        if (text !== lastError) log.warning(`${name} controller: pass failed, retrying: ${text}`);
        lastError = text;
        next = periodMs;
      }
    }
  })();
  return { name, passes: () => passes, trigger, finished };
}
