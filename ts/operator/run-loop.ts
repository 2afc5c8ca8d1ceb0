// The reconcile loop: a pass on every trigger (a watch event) and at the latest every
// `periodMs`, sooner when a pass asks (requeue while not Available). Passes never overlap;
// triggers that come in a burst give one pass; a failed pass is logged (once while it keeps
// failing the same way) and retried with a growing delay.
import { type OperatorLog, reason } from './log.ts';

const SETTLE_MS = 100;
const FIRST_RETRY_MS = 1000;

export interface Loop {
  trigger(): void;
  /** Successful passes so far. */
  passes(): number;
  /** Resolves when the loop has stopped (after `signal` aborted and the running pass ended). */
  finished: Promise<void>;
}

export function runLoop(reconcile: () => Promise<number | undefined>, periodMs: number, signal: AbortSignal, log: OperatorLog): Loop {
  let passes = 0;
  let pending = true;
  let wake: (() => void) | undefined;
  const trigger = () => {
    pending = true;
    wake?.();
  };
  signal.addEventListener('abort', trigger, { once: true });
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = () => setTimeout(done, SETTLE_MS);
    });
  const finished = (async () => {
    let lastError = '';
    let retry = FIRST_RETRY_MS;
    let next = 0;
    while (!signal.aborted) {
      if (!pending || next > 0) await sleep(pending ? Math.min(next, SETTLE_MS) : next);
      if (signal.aborted) break;
      pending = false;
      try {
        next = Math.min(periodMs, (await reconcile()) ?? periodMs);
        passes++;
        if (lastError) log.info('reconcile: a pass succeeded again');
        lastError = '';
        retry = FIRST_RETRY_MS;
      } catch (err) {
        const text = reason(err);
        if (text !== lastError) log.warning(`reconcile: the pass failed, trying again: ${text}`);
        lastError = text;
        next = retry;
        retry = Math.min(retry * 2, periodMs);
      }
      // A pass that asks for the next at once still leaves the API a moment.
      next = Math.max(next, SETTLE_MS);
    }
  })();
  return { trigger, passes: () => passes, finished };
}
