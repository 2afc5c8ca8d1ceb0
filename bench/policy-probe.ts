// A helper process of bench/policy.ts, run inside a network namespace (`ip netns exec <ns> node
// bench/policy-probe.ts`): it reads one JSON request a line on stdin and answers one JSON line each.
//   {id, op: 'open', host, port, timeoutMs}: a new TCP connection to host:port every INTERVAL_MS
//     until one connects; answers the start of that attempt (ns on the monotonic clock, which the
//     bench shares: process.hrtime.bigint() is CLOCK_MONOTONIC in every process).
//   {id, op: 'closed', host, port, timeoutMs}: the same, until CLOSED_RUN attempts in a row failed
//     (refused, or no connection within ATTEMPT_MS): the bench's untimed wait for a reset.
//   {id, op: 'get', url}: an HTTP GET (the agent's health server on the namespace's loopback).
// Ends with its stdin; every attempt ends by itself.
import { connect } from 'node:net';
import { createInterface } from 'node:readline';

const INTERVAL_MS = 1;
const ATTEMPT_MS = 200;
const CLOSED_RUN = 40;

interface Request {
  id: number;
  op: 'open' | 'closed' | 'get';
  host?: string;
  port?: number;
  timeoutMs?: number;
  url?: string;
}

const answer = (reply: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(reply)}\n`);

/** One connection attempt: resolves whether it connected within ATTEMPT_MS. */
function attempt(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (connected: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(connected);
    };
    const timer = setTimeout(() => done(false), ATTEMPT_MS);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function probe(request: Request): void {
  const { id, op, host = '', port = 0, timeoutMs = 10_000 } = request;
  const deadline = Date.now() + timeoutMs;
  let finished = false;
  let failedInARow = 0;
  let attempts = 0;
  const finish = (reply: Record<string, unknown>) => {
    if (finished) return;
    finished = true;
    clearInterval(timer);
    answer({ id, attempts, ...reply });
  };
  const timer = setInterval(() => {
    if (Date.now() > deadline) return finish({ timeout: true });
    const startNs = process.hrtime.bigint();
    attempts++;
    void attempt(host, port).then((connected) => {
      if (op === 'open' && connected) finish({ startNs: String(startNs) });
      if (op === 'closed') {
        failedInARow = connected ? 0 : failedInARow + 1;
        if (failedInARow >= CLOSED_RUN) finish({ startNs: String(startNs) });
      }
    });
  }, INTERVAL_MS);
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const request = JSON.parse(line) as Request;
  if (request.op === 'get')
    fetch(request.url ?? '', { signal: AbortSignal.timeout(5000) }).then(
      async (response) => answer({ id: request.id, status: response.status, text: await response.text() }),
      (err: unknown) => answer({ id: request.id, status: 0, text: String(err) }),
    );
  else probe(request);
});
