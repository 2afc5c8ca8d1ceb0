// A helper process of bench/flows.ts, run inside the client pod's network namespace
// (`ip netns exec <ns> node bench/flows-connect.ts HOST PORT SECONDS CONCURRENCY`): new TCP
// connections to HOST:PORT as fast as they go, CONCURRENCY at a time, for SECONDS: each one opened,
// closed by this end once it connects (a FIN, the listener closing its own end in answer) and
// counted once both ends are closed. Prints one JSON line: the connections completed, the attempts
// that failed, and the seconds from the first connection's start to the last one's close.
import { connect } from 'node:net';

const [host = '', port = '0', seconds = '1', concurrency = '1'] = process.argv.slice(2);

/** One connection, opened and closed: whether it connected and closed without an error. */
const once = () =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host, port: Number(port) });
    socket.once('connect', () => socket.end());
    socket.once('error', () => undefined);
    socket.once('close', (hadError) => resolve(!hadError));
  });

const start = process.hrtime.bigint();
const deadline = start + BigInt(Math.round(Number(seconds) * 1e9));
let completed = 0;
let failed = 0;
let last = start;
const worker = async () => {
  while (process.hrtime.bigint() < deadline) {
    if (await once()) completed++;
    else failed++;
    last = process.hrtime.bigint();
  }
};
await Promise.all(Array.from({ length: Number(concurrency) }, worker));
process.stdout.write(`${JSON.stringify({ completed, failed, seconds: Number(last - start) / 1e9 })}\n`);
