// A pod's one process in the truth-table suites (truth-table.ts), run inside its network
// namespace (`nsenter --net=… node pod-process.ts <port>…`): it serves TCP (accepts, echoes) and
// UDP (echoes each datagram to its sender, and notes who sent it) on the ports given, and makes
// probes when asked on stdin. One JSON request a line, one JSON answer a line with the same id:
//   {id, probes: [{address, port, protocol, sourcePort}], timeoutMs} → {id, results: [Outcome…]}
//   {id, received: true} → {id, received: ["<address>:<source port>"…]}   (UDP since the last ask)
//   {id, fetch: url} → {id, status, text}   (the node's helper reads the agent's metrics so)
// "ready" is written once every server listens. Probes run all at once; each has its own source
// port (chosen by the test) so that no conntrack entry of an earlier probe carries it.
//
// Telling a drop from a slow machine: a probe whose timer fires late (this process did not run for
// a while) is 'late', not 'deny', and the answers that came while it did not run are read before
// its timer decides. A UDP datagram the server got was let through, however late its echo.
import { createSocket } from 'node:dgram';
import { connect, createServer } from 'node:net';
import { createInterface } from 'node:readline';

interface ProbeRequest {
  address: string;
  port: number;
  protocol: 'TCP' | 'UDP';
  sourcePort: number;
}

interface Request {
  id: number;
  probes?: ProbeRequest[];
  timeoutMs?: number;
  received?: boolean;
  fetch?: string;
}

type Outcome = 'allow' | 'deny' | 'late';

/** UDP datagrams are sent again this often within a probe: one lost on the way is no "denied". */
const UDP_RESEND_MS = 100;
/** A timer this much late means the process was not running: the probe proves nothing. */
const LATE_MS = 100;
/** Datagrams already in the sockets are read before `received` answers. */
const DRAIN_MS = 20;

const ports = process.argv.slice(2).map(Number);
const received = new Set<string>();

async function serve(port: number): Promise<void> {
  const tcp = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.pipe(socket);
  });
  const udp = createSocket('udp4');
  udp.on('message', (message, from) => {
    received.add(`${from.address}:${from.port}`);
    udp.send(message, from.port, from.address);
  });
  await Promise.all([
    new Promise<void>((resolve) => tcp.listen(port, '0.0.0.0', resolve)),
    new Promise<void>((resolve) => udp.bind(port, '0.0.0.0', resolve)),
  ]);
}

/**
 * A timer for `timeoutMs` that calls `expired` with 'deny', or 'late' when it fired late; only
 * after the I/O already waiting was handled (setImmediate runs after this turn's poll).
 */
function timeout(timeoutMs: number, expired: (outcome: Outcome) => void): NodeJS.Timeout {
  const due = performance.now() + timeoutMs;
  return setTimeout(() => {
    const outcome = performance.now() - due > LATE_MS ? 'late' : 'deny';
    setImmediate(() => expired(outcome));
  }, timeoutMs);
}

/** A TCP handshake completes within the timeout; the connection is then reset (no TIME_WAIT to reuse the port after). */
function tcpProbe(probe: ProbeRequest, timeoutMs: number): Promise<Outcome> {
  return new Promise((resolve) => {
    let finished = false;
    const socket = connect({ host: probe.address, port: probe.port, localPort: probe.sourcePort });
    const done = (outcome: Outcome) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      if (outcome === 'allow') socket.resetAndDestroy();
      else socket.destroy();
      resolve(outcome);
    };
    const timer = timeout(timeoutMs, done);
    socket.once('connect', () => done('allow'));
    socket.once('error', () => done('deny'));
  });
}

/** A UDP datagram's echo comes back within the timeout. */
function udpProbe(probe: ProbeRequest, timeoutMs: number): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    let timer: NodeJS.Timeout | undefined;
    let resend: NodeJS.Timeout | undefined;
    let finished = false;
    const done = (outcome: Outcome) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      clearInterval(resend);
      socket.close();
      resolve(outcome);
    };
    const send = () => socket.send('ping', probe.port, probe.address, () => undefined);
    socket.on('error', () => done('deny'));
    socket.on('message', () => done('allow'));
    socket.bind(probe.sourcePort, () => {
      timer = timeout(timeoutMs, done);
      resend = setInterval(send, UDP_RESEND_MS);
      send();
    });
  });
}

async function answer(request: Request): Promise<object> {
  if (request.fetch !== undefined) {
    try {
      const response = await fetch(request.fetch);
      return { id: request.id, status: response.status, text: await response.text() };
    } catch {
      return { id: request.id, status: 0, text: '' };
    }
  }
  if (request.received) {
    await new Promise((resolve) => setTimeout(() => setImmediate(resolve), DRAIN_MS));
    const list = [...received];
    received.clear();
    return { id: request.id, received: list };
  }
  const timeoutMs = request.timeoutMs ?? 400;
  const results = await Promise.all(
    (request.probes ?? []).map((probe) => (probe.protocol === 'TCP' ? tcpProbe(probe, timeoutMs) : udpProbe(probe, timeoutMs))),
  );
  return { id: request.id, results };
}

await Promise.all(ports.map(serve));
process.stdout.write('ready\n');
createInterface({ input: process.stdin }).on('line', (line) => {
  void answer(JSON.parse(line) as Request).then((reply) => process.stdout.write(`${JSON.stringify(reply)}\n`));
});
// The test closing its end (or dying) ends the pod.
process.stdin.on('end', () => process.exit(0));
