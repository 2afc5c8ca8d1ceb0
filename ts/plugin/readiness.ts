// Readiness gates: each URL of `readiness_gates` is polled with GET until it answers 2xx or 3xx;
// networking (and address allocation) goes on only when all are ready. All gates are polled at
// once, the first probe straight away (the reference waits 5 s before its first), then every
// READINESS_INTERVAL_MS, each for up to `readiness_gate_timeout_seconds`.
import { CniError, ErrorCode } from '../cni/errors.ts';
import type { Logger } from '../log/logger.ts';
import { HttpClient } from '../net/http-client.ts';

const READINESS_INTERVAL_MS = 200;

export async function waitForReadinessGates(urls: readonly string[], timeoutSeconds: number, log: Logger): Promise<void> {
  if (urls.length === 0) return;
  await Promise.all(urls.map((url) => waitForGate(url, timeoutSeconds * 1000, log)));
}

async function waitForGate(text: string, timeoutMs: number, log: Logger): Promise<void> {
  const url = new URL(text);
  // A probe that hangs must not hold ADD past the gate's timeout. No proxy: gates are node-local
  // or cluster-internal services.
  const http = new HttpClient({
    endpoints: [new URL(url.origin)],
    connectTimeoutMs: Math.min(2_000, timeoutMs),
    requestTimeoutMs: Math.min(5_000, timeoutMs),
  });
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  try {
    for (;;) {
      try {
        const { status } = await http.request({ method: 'GET', path: `${url.pathname}${url.search}` });
        if (status >= 200 && status < 400) {
          log.debug('readiness gate ready', { gate: text, status });
          return;
        }
        last = `status ${status}`;
      } catch (err) {
        last = (err as Error).message;
      }
      if (Date.now() + READINESS_INTERVAL_MS > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, READINESS_INTERVAL_MS));
    }
  } finally {
    http.close();
  }
  throw new CniError(
    ErrorCode.TryAgainLater,
    `readiness gate ${text} was not ready within ${timeoutMs / 1000} s; it last answered: ${last}`,
  );
}
