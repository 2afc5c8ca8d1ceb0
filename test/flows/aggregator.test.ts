// netplug-flows against a real kube-apiserver: writers' tokens verified by real TokenReviews (the
// aggregator with exactly `create` on tokenreviews), tokens from real TokenRequests (audience
// netplug-flows, or the API server's own), a pod-bound token naming its node; the aggregator run
// in-process (runFlowsMain) and, for retention by size over TLS, as the built dist/bin/netplug-flows;
// the built dist/bin/netplugctl reading it black-box with --server (no kubelet here to port-forward
// through). Each test writes records of a namespace of its own and reads that namespace only.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';

import test from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { makeTestCa } from '../../scripts/lib/test-ca.ts';
import { runFlowsMain } from '../../ts/flows/main.ts';
import type { FlowRecord } from '../../ts/model/flow.ts';
import { ROOT, requireBuilt, tempDir } from '../helpers/cni.ts';
import { freePort } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { NETPLUGCTL } from '../helpers/ipam.ts';
import { createNode, type Kube, startKube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { flowRecord, pod } from './records.ts';

const NETPLUG_FLOWS = join(ROOT, 'dist/bin/netplug-flows');
const AGGREGATOR_RULES: k8s.V1PolicyRule[] = [{ apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] }];
const ACCOUNTS = `flows-sa-${process.pid}`;

const shared = sharedTeardowns(test);
let kube: Kube;
let aggregatorKubeconfig: string;
/** The in-process aggregator's addresses and log. */
let flows: { write: string; read: string; health: string; lines: string[] };
const tokens: Record<'writer' | 'other' | 'wrongAudience', string> = { writer: '', other: '', wrongAudience: '' };

async function token(name: string, audiences: string[], bound?: k8s.V1BoundObjectReference): Promise<string> {
  const issued = await kube.core.createNamespacedServiceAccountToken({
    name,
    namespace: ACCOUNTS,
    body: { spec: { audiences, expirationSeconds: 3600, ...(bound ? { boundObjectRef: bound } : {}) } },
  });
  if (!issued.status?.token) throw new Error(`no token for ${name}`);
  return issued.status.token;
}

/** runFlowsMain with `env` on free ports of the loopback; stopped after the file. */
async function startAggregator(env: Record<string, string>) {
  const [write, read, health] = [await freePort(), await freePort(), await freePort()];
  const lines: string[] = [];
  const stop = new AbortController();
  const exit = runFlowsMain(
    [],
    {
      KUBECONFIG: aggregatorKubeconfig,
      NETPLUG_FLOWS_LISTEN: `127.0.0.1:${write}`,
      NETPLUG_FLOWS_READ_LISTEN: `127.0.0.1:${read}`,
      NETPLUG_FLOWS_HEALTH_ADDR: `127.0.0.1:${health}`,
      ...env,
    },
    stop.signal,
    { writeLog: (line) => lines.push(line) },
  );
  shared.teardown(async () => {
    stop.abort();
    await exit;
  });
  const started = {
    write: `http://127.0.0.1:${write}`,
    read: `http://127.0.0.1:${read}`,
    health: `http://127.0.0.1:${health}`,
    lines,
  };
  await eventually('netplug-flows serves', async () => (await fetch(`${started.health}/readyz`)).status === 200, {
    context: () => lines.join(''),
  });
  return started;
}

test.before(async () => {
  requireBuilt();
  kube = await startKube(shared);
  aggregatorKubeconfig = (await kube.identityWith('netplug-flows-test', AGGREGATOR_RULES)).kubeconfig;
  await kube.core.createNamespace({ body: { metadata: { name: ACCOUNTS } } });
  for (const name of ['writer', 'other'])
    await kube.core.createNamespacedServiceAccount({ namespace: ACCOUNTS, body: { metadata: { name } } });
  tokens.writer = await token('writer', ['netplug-flows']);
  tokens.other = await token('other', ['netplug-flows']);
  tokens.wrongAudience = await token('writer', []);
  flows = await startAggregator({ NETPLUG_FLOWS_WRITERS: `${ACCOUNTS}:writer`, LOG_LEVEL: 'debug' });
});

interface Answer {
  status: number;
  text: string;
  json: any;
}

/** A request with node's http(s) (a CA for TLS), so that a test controls the headers and the body as sent. */
function send(
  url: string,
  options: { method?: string; token?: string; body?: string | Buffer; headers?: Record<string, string>; ca?: string } = {},
): Promise<Answer> {
  const target = new URL(url);
  const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method: options.method ?? 'POST',
        headers: {
          'Content-Type': 'application/json',
          ...(options.token ? { Authorization: `Bearer ${options.token}` } : {}),
          ...options.headers,
        },
        ...(options.ca ? { ca: readFileSync(options.ca) } : {}),
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: response.statusCode ?? 0, text, json });
        });
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const post = (records: FlowRecord[], token = tokens.writer, base = flows.write) =>
  send(`${base}/v1/flows`, { token, body: JSON.stringify({ records }) });

async function held(query: string, base = flows.read): Promise<FlowRecord[]> {
  const answer = await send(`${base}/v1/flows?${query}`, { method: 'GET' });
  if (answer.status !== 200) throw new Error(`GET ${query}: ${answer.status} ${answer.text}`);
  return answer.json.records;
}

const exec = promisify(execFile);

/** The built netplugctl (asynchronously: the aggregator in this process must answer it). */
async function netplugctl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(NETPLUGCTL, args, { env: { PATH: '/usr/bin:/bin', HOME: '/nonexistent' }, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failed = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

async function metric(name: string, base = flows.health): Promise<number | undefined> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

test('a batch posted with a writer token is kept and read back, newest last', async (t) => {
  const namespace = 'kept';
  const end = Date.now();
  const records = [
    flowRecord({ end: end - 1000, source: pod(namespace, 'a', '10.0.0.1'), destination: pod(namespace, 'b', '10.0.0.2', 80) }),
    flowRecord({ end, source: pod(namespace, 'a', '10.0.0.1'), destination: pod(namespace, 'c', '10.0.0.3', 80) }),
  ];
  const before = (await metric('netplug_flows_records_received_total')) ?? 0;
  const answer = await post([records[1] as FlowRecord, records[0] as FlowRecord]);
  t.is(answer.status, 200, answer.text);
  t.deepEqual(answer.json, { accepted: 2 });
  t.deepEqual(await held(`namespace=${namespace}`), records);
  t.true(((await metric('netplug_flows_records_received_total')) ?? 0) >= before + 2);
  t.true(((await metric('netplug_flows_records_held')) ?? 0) >= 2);
  t.true(flows.lines.some((line) => line.includes(`took 2 records from system:serviceaccount:${ACCOUNTS}:writer`)));

  // gzip, as a node may send a large batch.
  const zipped = flowRecord({ end, source: pod(namespace, 'zip', '10.0.0.9') });
  const gz = await send(`${flows.write}/v1/flows`, {
    token: tokens.writer,
    body: gzipSync(JSON.stringify({ records: [zipped] })),
    headers: { 'Content-Encoding': 'gzip' },
  });
  t.is(gz.status, 200, gz.text);
  t.deepEqual(await held(`namespace=${namespace}&pod=zip`), [zipped]);
});

test('writes are refused without a token (401), with a bad token or one for another audience (401), by another account (403)', async (t) => {
  const batch = [flowRecord({ source: pod('refused', 'a', '10.0.0.1') })];
  const none = await post(batch, '');
  t.is(none.status, 401);
  t.regex(none.json.error, /^no bearer token/);
  const garbage = await post(batch, 'not-a-token');
  t.is(garbage.status, 401);
  const audience = await post(batch, tokens.wrongAudience);
  t.is(audience.status, 401, audience.text);
  t.regex(audience.json.error, /not a valid service account token for the audience netplug-flows/);
  const other = await post(batch, tokens.other);
  t.is(other.status, 403, other.text);
  t.regex(other.json.error, new RegExp(`system:serviceaccount:${ACCOUNTS}:other may not write flow records`));
  t.deepEqual(await held('namespace=refused'), [], 'nothing kept');
  // Asked again: the kept verdict answers alike.
  t.is((await post(batch, tokens.other)).status, 403);
  t.true(((await metric('netplug_flows_writes_refused_total{reason="unauthenticated"}')) ?? 0) >= 3);
  t.true(((await metric('netplug_flows_writes_refused_total{reason="forbidden"}')) ?? 0) >= 2);
});

test('a malformed batch gets 400 naming the field; a batch over 4 MiB 413; reads refuse a bad parameter', async (t) => {
  const good = flowRecord({ source: pod('malformed', 'a', '10.0.0.1') });
  const wrongType = await send(`${flows.write}/v1/flows`, {
    token: tokens.writer,
    body: JSON.stringify({ records: [good, { ...good, protocol: 'tcp' }] }),
  });
  t.is(wrongType.status, 400);
  t.is(wrongType.json.error, 'field "records[1].protocol" must be a number, got "tcp"');
  const badEnum = await send(`${flows.write}/v1/flows`, {
    token: tokens.writer,
    body: JSON.stringify({ records: [{ ...good, source: { ...good.source, kind: 'vm' } }] }),
  });
  t.is(badEnum.status, 400);
  t.regex(badEnum.json.error, /^field "records\[0\]\.source\.kind" must be "pod" or "hep" or "net" or "external", got "vm"/);
  const missing = await send(`${flows.write}/v1/flows`, {
    token: tokens.writer,
    body: JSON.stringify({ records: [{ ...good, node: undefined }] }),
  });
  t.is(missing.status, 400);
  t.is(missing.json.error, 'field "records[0].node" is required');
  const notJson = await send(`${flows.write}/v1/flows`, { token: tokens.writer, body: '{"records": [' });
  t.is(notJson.status, 400);
  t.regex(notJson.json.error, /^the body is not JSON/);
  const large = await send(`${flows.write}/v1/flows`, { token: tokens.writer, body: `{"records": [], "pad": "${'x'.repeat(5 << 20)}"}` });
  t.is(large.status, 413);
  t.deepEqual(await held('namespace=malformed'), [], 'nothing kept');

  const read = await send(`${flows.read}/v1/flows?action=drop`, { method: 'GET' });
  t.is(read.status, 400);
  t.is(read.json.error, 'action "drop" must be Allow or Deny');
  // A writer is not a reader (test/flows/readers.test.ts has the readers).
  const writerReads = await send(`${flows.write}/v1/flows`, { method: 'GET', token: tokens.writer });
  t.is(writerReads.status, 403, writerReads.text);
  t.regex(writerReads.json.error, /may not read flow records: it is not one of the service accounts NETPLUG_FLOWS_READERS names/);
  t.is((await send(`${flows.write}/v1/flows`, { method: 'PUT', token: tokens.writer })).status, 405);
});

test("a pod-bound token names its node: that writer posts its node's records only", async (t) => {
  const node = `flows-node-${process.pid}`;
  await createNode(kube, t, node);
  const created = await kube.core.createNamespacedPod({
    namespace: ACCOUNTS,
    body: {
      metadata: { name: 'netplug-node-x' },
      spec: { nodeName: node, serviceAccountName: 'writer', containers: [{ name: 'main', image: 'busybox' }] },
    },
  });
  t.teardown(() => kube.core.deleteNamespacedPod({ name: 'netplug-node-x', namespace: ACCOUNTS }).catch(() => undefined));
  const bound = await token('writer', ['netplug-flows'], {
    kind: 'Pod',
    apiVersion: 'v1',
    name: 'netplug-node-x',
    uid: created.metadata?.uid,
  });
  const own = flowRecord({ node, source: pod('bound', 'a', '10.0.0.1') });
  const answer = await post([own], bound);
  t.is(answer.status, 200, answer.text);
  const foreign = await post([own, { ...own, node: 'elsewhere' }], bound);
  t.is(foreign.status, 403);
  t.is(
    foreign.json.error,
    `field "records[1].node" is "elsewhere", but the token is of a pod on node "${node}": a node posts its own records only`,
  );
  t.deepEqual(await held('namespace=bound'), [own]);
});

/** Records of namespace `ns` for netplugctl's filters: two pods, two policies, both verdicts. */
function mixed(namespace: string): FlowRecord[] {
  const end = Date.now();
  return [
    flowRecord({
      end: end - 3000,
      source: pod(namespace, 'client', '10.1.0.1'),
      destination: pod(namespace, 'web', '10.1.0.2', 8080),
      policy: { policy: `NetworkPolicy/${namespace}/allow-web`, tier: 'default', rule: 0, action: 'Allow' },
    }),
    flowRecord({
      end: end - 2000,
      node: 'node-b',
      source: pod(namespace, 'client', '10.1.0.1'),
      destination: { address: '203.0.113.5', port: 443, kind: 'external' },
      action: 'Deny',
      policy: { policy: 'GlobalNetworkPolicy/deny-egress', tier: 'default', rule: 1, action: 'Deny' },
      flows: 7,
    }),
    flowRecord({
      end: end - 1000,
      source: pod(namespace, 'batch', '10.1.0.3'),
      destination: pod(namespace, 'web', '10.1.0.2', 8080),
      action: 'Deny',
      policy: { policy: 'default-deny', tier: 'default', action: 'Deny' },
    }),
  ];
}

test('netplugctl flows --server: filters by namespace, pod, policy and action; table and -o json', async (t) => {
  const namespace = 'ctl';
  const records = mixed(namespace);
  t.is((await post(records)).status, 200);
  const server = ['--server', flows.read];

  const all = await netplugctl('flows', ...server, '--namespace', namespace);
  t.is(all.code, 0, all.stderr);
  const lines = all.stdout.trimEnd().split('\n');
  t.regex(lines[0] ?? '', /^TIME\s+NODE\s+SOURCE\s+DESTINATION\s+PROTOCOL\s+REPORTER\s+ACTION\s+POLICY\s+RULE\s+FLOWS\s+PACKETS\s+BYTES$/);
  t.is(lines.length, 4);
  t.regex(lines[1] ?? '', /Z\s+node-a\s+ctl\/client\s+ctl\/web:8080\s+TCP\s+dst\s+Allow\s+ctl\/allow-web\s+0\s+3\s+40\s+5200$/);
  t.regex(lines[2] ?? '', /node-b\s+ctl\/client\s+203\.0\.113\.5:443\s+TCP\s+dst\s+Deny\s+deny-egress\s+1\s+7\s+40\s+5200$/);
  t.regex(lines[3] ?? '', /ctl\/batch\s+ctl\/web:8080\s+TCP\s+dst\s+Deny\s+default-deny\s+-\s+/);

  const json = async (...flags: string[]) => {
    const outcome = await netplugctl('flows', ...server, '--namespace', namespace, '-o', 'json', ...flags);
    t.is(outcome.code, 0, outcome.stderr);
    return (JSON.parse(outcome.stdout) as { records: FlowRecord[] }).records;
  };
  t.deepEqual(await json(), records);
  t.deepEqual(await json('--pod', 'batch'), [records[2]]);
  t.deepEqual(await json('--pod', `${namespace}/web`), [records[0], records[2]]);
  t.deepEqual(await json('--policy', `${namespace}/allow-web`), [records[0]]);
  t.deepEqual(await json('--policy', 'deny-egress'), [records[1]]);
  t.deepEqual(await json('--action', 'Deny'), [records[1], records[2]]);
  t.deepEqual(await json('--action', 'deny', '--node', 'node-b'), [records[1]]);
  t.deepEqual(await json('--since', '1h', '--limit', '1'), [records[2]]);
  t.deepEqual(await json('--namespace', 'nobody-here'), []);

  const none = await netplugctl('flows', ...server, '--namespace', 'nobody-here');
  t.is(none.code, 0);
  t.is(none.stdout, '');
  t.is(none.stderr, 'no flow record matches\n');
});

test('netplugctl flows --follow prints a record posted after it started, until interrupted', async (t) => {
  const namespace = 'follow';
  const before = flowRecord({ source: pod(namespace, 'early', '10.2.0.1') });
  t.is((await post([before])).status, 200);
  const child: ChildProcess = spawn(NETPLUGCTL, ['flows', '--follow', '--server', flows.read, '--namespace', namespace], {
    env: { PATH: '/usr/bin:/bin' },
  });
  t.teardown(() => child.kill('SIGKILL'));
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await eventually('the header', () => stdout.startsWith('TIME'), { context: () => stderr });
  // The request reaches the aggregator after the header is printed: post until the row shows.
  const after = flowRecord({ source: pod(namespace, 'late', '10.2.0.2'), destination: pod(namespace, 'web', '10.2.0.3', 80) });
  await eventually(
    'the record posted after the start',
    async () => {
      t.is((await post([after])).status, 200);
      return stdout.includes('follow/late');
    },
    { intervalMs: 500, context: () => stdout + stderr },
  );
  t.false(stdout.includes('follow/early'), 'records held before are not printed without --since or --limit');
  t.regex(stdout, /follow\/late\s+follow\/web:80\s+TCP\s+dst\s+Allow\s+shop\/allow-web/);
  child.kill('SIGINT');
  t.is(await exited, 0, stderr);

  // -o json --since: the held records first, one a line.
  const json = spawn(NETPLUGCTL, ['flows', '-f', '-o', 'json', '--since', '1h', '--server', flows.read, '--pod', `${namespace}/early`], {
    env: { PATH: '/usr/bin:/bin' },
  });
  t.teardown(() => json.kill('SIGKILL'));
  let out = '';
  json.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await eventually('the held record', () => out.includes('\n'));
  t.deepEqual(JSON.parse(out.split('\n')[0] ?? ''), before);
  json.kill('SIGINT');
});

test('netplugctl flows: a bad flag is one line naming the flag and value, exit 2; no pod to forward to, exit 1', async (t) => {
  for (const [args, message] of [
    [['--action', 'drop'], 'netplugctl flows: --action "drop" must be Allow or Deny (netplugctl flows --help)\n'],
    [['--since', 'yesterday'], /^netplugctl flows: --since "yesterday" must be a duration such as 15m/],
    [['-o', 'yaml'], 'netplugctl flows: -o "yaml" must be table or json (netplugctl flows --help)\n'],
    [['--pod', 'a/b/c'], 'netplugctl flows: --pod "a/b/c" must be NAME or NAMESPACE/NAME (netplugctl flows --help)\n'],
    [['--server', 'localhost:9446'], /^netplugctl flows: --server "localhost:9446" must be a URL such as/],
    [['--limit', 'all'], /^netplugctl flows: --limit "all" must be a whole number/],
    [['--colour'], /^netplugctl flows: unknown flag '--colour'/],
  ] as const) {
    const outcome = await netplugctl('flows', ...args);
    t.is(outcome.code, 2, `${args.join(' ')}: ${outcome.stderr}`);
    if (typeof message === 'string') t.is(outcome.stderr, message);
    else t.regex(outcome.stderr, message);
  }
  const help = await netplugctl('flows', '--help');
  t.is(help.code, 0);
  t.regex(help.stdout, /^usage: netplugctl flows /);
  t.regex((await netplugctl('--help')).stdout, /flows \[--namespace NS\]/);

  const empty = `flows-none-${process.pid}`;
  await kube.core.createNamespace({ body: { metadata: { name: empty } } });
  t.teardown(() => kube.core.deleteNamespace({ name: empty }).catch(() => undefined));
  const unfound = await netplugctl('flows', '--kubeconfig', kube.server.admin.kubeconfig, '--flows-namespace', empty);
  t.is(unfound.code, 1);
  t.regex(unfound.stderr, new RegExp(`^netplugctl flows: no ready pod labelled k8s-app=netplug-flows in namespace ${empty}`));
  const unreachable = await netplugctl('flows', '--server', `http://127.0.0.1:${await freePort()}`);
  t.is(unreachable.code, 1);
  t.regex(unreachable.stderr, /^netplugctl flows: cannot read netplug-flows at http:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED/);
});

test('the built netplug-flows over TLS: beyond NETPLUG_FLOWS_MAX_BYTES the oldest records are dropped', async (t) => {
  const dir = tempDir(t, 'flows-tls');
  const ca = makeTestCa(dir, 'netplug-flows test CA');
  ca.signSync('serving', '/CN=netplug-flows', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  const [write, read, health] = [await freePort(), await freePort(), await freePort()];
  const child = spawn(NETPLUG_FLOWS, [], {
    env: {
      KUBECONFIG: aggregatorKubeconfig,
      NETPLUG_FLOWS_LISTEN: `127.0.0.1:${write}`,
      NETPLUG_FLOWS_READ_LISTEN: `127.0.0.1:${read}`,
      NETPLUG_FLOWS_HEALTH_ADDR: `127.0.0.1:${health}`,
      NETPLUG_FLOWS_WRITERS: `${ACCOUNTS}:writer`,
      NETPLUG_FLOWS_MAX_BYTES: '2Ki',
      NETPLUG_FLOWS_TLS_CERT_FILE: join(dir, 'serving.pem'),
      NETPLUG_FLOWS_TLS_KEY_FILE: join(dir, 'serving.key'),
    },
  });
  let log = '';
  child.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(() => child.kill('SIGKILL'));
  const healthUrl = `http://127.0.0.1:${health}`;
  await eventually('the built netplug-flows serves', async () => (await fetch(`${healthUrl}/readyz`)).status === 200, {
    context: () => log,
  });
  t.regex(log, /taking flow records on 127\.0\.0\.1:\d+ \(TLS\)/);

  const base = `https://127.0.0.1:${write}`;
  const end = Date.now();
  const records = Array.from({ length: 8 }, (_, i) => flowRecord({ end: end - 8000 + i * 1000, node: `n-${i}` }));
  const size = Buffer.byteLength(JSON.stringify(records[0]));
  for (const batch of [records.slice(0, 4), records.slice(4)]) {
    const answer = await send(`${base}/v1/flows`, { token: tokens.writer, body: JSON.stringify({ records: batch }), ca: ca.ca });
    t.is(answer.status, 200, answer.text);
  }
  const kept = await held('', `http://127.0.0.1:${read}`);
  const fits = Math.floor(2048 / size);
  t.deepEqual(
    kept.map((record) => record.node),
    records.slice(8 - fits).map((record) => record.node),
    'the newest that fit',
  );
  t.is(await metric('netplug_flows_records_dropped_total{reason="size"}', healthUrl), 8 - fits);
  t.is(await metric('netplug_flows_bytes_held', healthUrl), fits * size);
  // Plain HTTP is not served there.
  await t.throwsAsync(send(`http://127.0.0.1:${write}/v1/flows`, { token: tokens.writer, body: '{"records":[]}' }));

  child.kill('SIGTERM');
  t.is(await exited, 0, log);
});

test('bad settings stop netplug-flows with exit 1 and a line naming the variable and its value', async (t) => {
  for (const [env, message] of [
    [{ NETPLUG_FLOWS_MAX_BYTES: 'lots' }, /NETPLUG_FLOWS_MAX_BYTES "lots" must be a size of at least 1024 bytes, such as 64Mi or 512Ki/],
    [{ NETPLUG_FLOWS_RETENTION: '2 hours' }, /NETPLUG_FLOWS_RETENTION "2 hours" is not a duration/],
    [{ NETPLUG_FLOWS_WRITERS: 'netplug-node' }, /NETPLUG_FLOWS_WRITERS "netplug-node" must be service accounts as NAMESPACE:NAME/],
    [{ NETPLUG_FLOWS_LISTEN: '9445' }, /NETPLUG_FLOWS_LISTEN "9445" must be host:port/],
    [{ NETPLUG_FLOWS_TLS_CERT_FILE: '/tls.crt' }, /NETPLUG_FLOWS_TLS_CERT_FILE is set without NETPLUG_FLOWS_TLS_KEY_FILE/],
  ] as const) {
    const lines: string[] = [];
    const code = await runFlowsMain([], { KUBECONFIG: aggregatorKubeconfig, ...env }, new AbortController().signal, {
      writeLog: (line) => lines.push(line),
    });
    t.is(code, 1);
    t.is(lines.length, 1);
    t.regex(lines[0] ?? '', message);
  }
});
