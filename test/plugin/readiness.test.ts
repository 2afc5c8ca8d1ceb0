// Readiness gates through the built executable, against HTTP servers the tests run: a gate that
// turns ready a second after its first probe, one that never does (a clear error at the timeout,
// nothing allocated), one nothing listens on, several at once, a bad URL; and gates as real
// servers answer: Python's http.server (HTTP/1.0, close-delimited), 204, Connection: close, chunked.
// The plugin runs asynchronously: the gate servers answer from this process.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import test, { type ExecutionContext } from 'ava';

import { hostLocalNetconf, reservations, tempDir } from '../helpers/cni.ts';
import { addressesOf, invokeAsync } from '../helpers/ipam.ts';
import { containerId, createNetns, link } from '../helpers/kernel.ts';
import { serve } from '../net/servers.ts';

interface Gate {
  url: string;
  /** The status each probe was answered with, in order. */
  answers: number[];
  ready(): void;
}

/** A gate answering 503 until `ready()`, then 200; `onProbe` hears of each probe. */
async function startGate(t: ExecutionContext, readyStatus = 200, onProbe = () => {}): Promise<Gate> {
  let ready = false;
  const answers: number[] = [];
  const server: Server = createServer((request, response) => {
    onProbe();
    const status = request.method === 'GET' && ready ? readyStatus : 503;
    answers.push(status);
    response.writeHead(status).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/ready`, answers, ready: () => (ready = true) };
}

let subnets = 0;

function gatedAdd(t: ExecutionContext, gates: string[], extra: Record<string, unknown> = {}) {
  const dataDir = tempDir(t, 'gate');
  // A subnet per ADD: the tests run at once, and host routes to one address would collide.
  const subnet = `10.150.${subnets++}.0/24`;
  const netconf = hostLocalNetconf({ version: '1.1.0', dataDir, subnet, extra: { readiness_gates: gates, ...extra } });
  const netns = createNetns(t, 'gate');
  const id = containerId();
  const call = { containerId: id, netns: netns.path, netconf };
  t.teardown(() => invokeAsync({ ...call, command: 'DEL' }));
  return { outcome: invokeAsync({ ...call, command: 'ADD' }), dataDir, netns };
}

test('a gate that turns ready a second after its first probe: ADD goes on when it is ready', async (t) => {
  // Ready a second after the first probe, however long the plugin took to start on a busy host.
  let turnsReady: NodeJS.Timeout | undefined;
  const gate: Gate = await startGate(t, 200, () => {
    turnsReady ??= setTimeout(() => gate.ready(), 1000);
  });
  t.teardown(() => clearTimeout(turnsReady));
  const { outcome, dataDir } = gatedAdd(t, [gate.url]);
  const add = await outcome;
  t.is(add.status, 0, add.stdout + add.stderr);
  t.is(gate.answers[0], 503, 'probed before it was ready');
  t.is(gate.answers.at(-1), 200);
  t.is(gate.answers.filter((s) => s === 200).length, 1, 'no probe after the ready answer');
  t.deepEqual(reservations(dataDir), addressesOf(add.json));
});

test('3xx counts as ready; every gate must be ready', async (t) => {
  const redirecting = await startGate(t, 302);
  const plain = await startGate(t);
  redirecting.ready();
  const turnsReady = setTimeout(() => plain.ready(), 500);
  t.teardown(() => clearTimeout(turnsReady));
  const add = await gatedAdd(t, [redirecting.url, plain.url]).outcome;
  t.is(add.status, 0, add.stdout + add.stderr);
  t.deepEqual(redirecting.answers, [302]);
  t.is(plain.answers.at(-1), 200);
});

test("a gate served by Python's http.server (HTTP/1.0, the body ends at close) lets ADD go on", async (t) => {
  const gate = await serve(t, 'http10');
  const { outcome, dataDir } = gatedAdd(t, [gate.url('/ready?probe=1').href], { readiness_gate_timeout_seconds: 5 });
  const add = await outcome;
  t.is(add.status, 0, add.stdout + add.stderr);
  t.deepEqual(reservations(dataDir), addressesOf(add.json));
});

test('gates answering 204 without Content-Length, with Connection: close, or chunked are ready', async (t) => {
  const gate = await serve(t, 'http11');
  const paths = ['/204', '/close', '/chunked'];
  const add = await gatedAdd(
    t,
    paths.map((path) => gate.url(path).href),
    { readiness_gate_timeout_seconds: 5 },
  ).outcome;
  t.is(add.status, 0, add.stdout + add.stderr);
});

test('a gate that never turns ready: ADD fails at the timeout naming it and its last answer, with nothing allocated', async (t) => {
  const gate = await startGate(t);
  const { outcome, dataDir, netns } = gatedAdd(t, [gate.url], { readiness_gate_timeout_seconds: 1 });
  const add = await outcome;
  t.is(add.json?.code, 11, add.stdout);
  t.is(add.json.msg, `readiness gate ${gate.url} was not ready within 1 s; it last answered: status 503`);
  t.true(gate.answers.length > 1, 'polled until the timeout');
  t.deepEqual(reservations(dataDir), []);
  t.is(link('eth0', netns), undefined);
});

test('a gate nothing listens on: the error says what the connection met', async (t) => {
  const { outcome } = gatedAdd(t, ['http://127.0.0.1:1/healthz'], { readiness_gate_timeout_seconds: 1 });
  const add = await outcome;
  t.is(add.json?.code, 11, add.stdout);
  t.regex(
    add.json.msg,
    /^readiness gate http:\/\/127\.0\.0\.1:1\/healthz was not ready within 1 s; it last answered: .*[Cc]onnection refused/,
  );
});

test('a gate that is not an http(s) URL is a configuration error naming it', async (t) => {
  const add = await gatedAdd(t, ['ftp://example.test/ready']).outcome;
  t.is(add.json?.code, 7, add.stdout);
  t.regex(add.json.msg, /readiness_gates\[0\].*ftp:\/\/example\.test\/ready/);
});
