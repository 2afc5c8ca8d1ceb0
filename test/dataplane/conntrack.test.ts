// The connection tracking table through the TypeScript facade and the built addon, on a real
// kernel: a server namespace and a client namespace joined by a veth pair, conntrack at work in
// the server's (an nftables rule matching `ct state` makes the kernel track its connections), TCP
// connections over IPv4 and IPv6 that send 5000 bytes and get 3000 back. dumpConntrack(), run in
// the server's namespace (conntrack-in-netns.ts, under `ip netns exec`), lists each with its
// tuples both ways, packets and bytes each way and its start, once enableConntrackAccounting()
// turned counting on; a connection made before that is listed with no counts. The sysctls are
// read back through /proc, an observer independent of the code under test.
import { execFileSync, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import test, { type ExecutionContext } from 'ava';

import { CONNTRACK_STATUS, type ConntrackDirection, type ConntrackEntry } from '../../ts/dataplane/conntrack.ts';
import { createNetns, ip, nftBinary, sysctl, type TestNetns } from '../helpers/kernel.ts';

const CHILD = fileURLToPath(new URL('./conntrack-in-netns.ts', import.meta.url));

function inNetns(netns: TestNetns, ...args: string[]): unknown {
  const out = execFileSync('ip', ['netns', 'exec', netns.name, process.execPath, CHILD, ...args], { encoding: 'utf8', timeout: 30_000 });
  return JSON.parse(out);
}

/** The two namespaces, 10.0.0.1 and fd00:77::1 the server's, 10.0.0.2 and fd00:77::2 the client's. */
function pair(t: ExecutionContext): { server: TestNetns; client: TestNetns } {
  const server = createNetns(t, 'cts');
  const client = createNetns(t, 'ctc');
  ip(['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', client.name], server);
  for (const [netns, host] of [
    [server, 1],
    [client, 2],
  ] as const) {
    ip(['addr', 'add', `10.0.0.${host}/24`, 'dev', 'eth0'], netns);
    ip(['addr', 'add', `fd00:77::${host}/64`, 'dev', 'eth0', 'nodad'], netns);
    ip(['link', 'set', 'eth0', 'up'], netns);
    ip(['link', 'set', 'lo', 'up'], netns);
  }
  // Conntrack hooks are registered in a namespace only once a rule needs them.
  const ruleset =
    'table inet nptest {\n  chain input {\n    type filter hook input priority 0;\n    ct state established counter\n  }\n}\n';
  execFileSync('ip', ['netns', 'exec', server.name, nftBinary(), '-f', '-'], { input: ruleset });
  return { server, client };
}

/** Starts a server for `count` connections in `netns`; resolves once it listens, with its exit code to come. */
async function serve(
  t: ExecutionContext,
  netns: TestNetns,
  port: number,
  count: number,
  answer: number,
): Promise<{ exited: Promise<number | null> }> {
  const child = spawn('ip', ['netns', 'exec', netns.name, process.execPath, CHILD, 'serve', String(port), String(count), String(answer)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  t.teardown(() => {
    if (child.exitCode === null) child.kill();
  });
  const lines = createInterface({ input: child.stdout });
  await new Promise<void>((resolve, reject) => {
    lines.on('line', (line) => line === 'listening' && resolve());
    void exited.then((code) => reject(new Error(`the server exited (${code}) before listening`)));
  });
  return { exited };
}

function connectFrom(netns: TestNetns, host: string, port: number, size: number): { port: number; received: number } {
  return inNetns(netns, 'connect', host, String(port), String(size)) as { port: number; received: number };
}

test('dumpConntrack lists TCP connections with their tuples, packets and bytes each way, once accounting is on', async (t) => {
  const { server, client } = pair(t);
  // Off, as in a namespace of a kernel loaded without nf_conntrack's acct=1.
  execFileSync('ip', [
    'netns',
    'exec',
    server.name,
    'sysctl',
    '-qw',
    'net.netfilter.nf_conntrack_acct=0',
    'net.netfilter.nf_conntrack_timestamp=0',
  ]);

  // Before accounting: tracked, but not counted nor stamped.
  const uncountedServer = await serve(t, server, 8081, 1, 3000);
  const uncounted = connectFrom(client, '10.0.0.1', 8081, 5000);
  t.is(await uncountedServer.exited, 0);

  t.deepEqual(inNetns(server, 'enable'), {});
  t.is(sysctl('net.netfilter.nf_conntrack_acct', server), '1');
  t.is(sysctl('net.netfilter.nf_conntrack_timestamp', server), '1');

  const before = Date.now();
  const counted = await serve(t, server, 8080, 2, 3000);
  const v4 = connectFrom(client, '10.0.0.1', 8080, 5000);
  const v6 = connectFrom(client, 'fd00:77::1', 8080, 5000);
  t.is(await counted.exited, 0);
  const after = Date.now();
  t.is(v4.received, 3000);
  t.is(v6.received, 3000);

  const entries = inNetns(server, 'dump') as ConntrackEntry[];
  const find = (port: number, dport: number) =>
    entries.find((e) => e.protocol === 6 && e.original.sourcePort === port && e.original.destinationPort === dport);

  for (const [family, local, seen, clientAddress, serverAddress] of [
    [4, v4, find(v4.port, 8080), '10.0.0.2', '10.0.0.1'],
    [6, v6, find(v6.port, 8080), 'fd00:77::2', 'fd00:77::1'],
  ] as const) {
    t.truthy(seen, `no entry for ${clientAddress}:${local.port} in ${JSON.stringify(entries)}`);
    if (!seen) continue;
    const tuple = (direction: ConntrackDirection) => ({
      source: direction.source,
      destination: direction.destination,
      sourcePort: direction.sourcePort,
      destinationPort: direction.destinationPort,
    });
    t.is(seen.family, family);
    t.deepEqual(tuple(seen.original), { source: clientAddress, destination: serverAddress, sourcePort: local.port, destinationPort: 8080 });
    t.deepEqual(tuple(seen.reply), { source: serverAddress, destination: clientAddress, sourcePort: 8080, destinationPort: local.port });
    // Handshake, data and close each way; every byte of IP, headers included.
    t.true(seen.original.packets >= 4, JSON.stringify(seen));
    t.true(seen.reply.packets >= 3, JSON.stringify(seen));
    t.true(seen.original.bytes > 5000 && seen.original.bytes < 5000 + seen.original.packets * 80, JSON.stringify(seen));
    t.true(seen.reply.bytes > 3000 && seen.reply.bytes < 3000 + seen.reply.packets * 80, JSON.stringify(seen));
    const bits = CONNTRACK_STATUS.seenReply | CONNTRACK_STATUS.assured | CONNTRACK_STATUS.confirmed;
    t.is(seen.status & bits, bits);
    t.is(seen.mark, 0);
    t.true(Number.isInteger(seen.id) && seen.id > 0);
    t.true(seen.start !== undefined && seen.start >= before - 1000 && seen.start <= after + 1000, `start ${seen.start}`);
    t.is(seen.stop, undefined);
  }

  const early = find(uncounted.port, 8081);
  t.like(early, { family: 4, original: { source: '10.0.0.2', packets: 0, bytes: 0 }, reply: { packets: 0, bytes: 0 } });
  t.is(early?.start, undefined);
  t.is(new Set(entries.map((e) => e.id)).size, entries.length, 'each entry once');
});
