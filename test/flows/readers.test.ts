// Reads on netplug-flows' write listener (the Service's port), for the flow viewer: a bearer token
// of a service account NETPLUG_FLOWS_READERS names, checked by a real TokenReview against a real
// kube-apiserver, lists and follows records as the loopback read listener does; no token, a bad
// token, another audience's (401), a writer's or another account's (403) read nothing, and a
// reader cannot write. The loopback read listener stays as it was, without a token.
import test from 'ava';
import type * as k8s from '@kubernetes/client-node';

import { runFlowsMain } from '../../ts/flows/main.ts';
import type { FlowRecord } from '../../ts/model/flow.ts';
import { freePort } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { type Kube, startKube } from '../helpers/kube.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { flowRecord, pod } from './records.ts';

const AGGREGATOR_RULES: k8s.V1PolicyRule[] = [{ apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] }];
const ACCOUNTS = `flows-readers-${process.pid}`;

const shared = sharedTeardowns(test);
let kube: Kube;
let flows: { write: string; read: string; lines: string[] };
const tokens: Record<'writer' | 'reader' | 'other' | 'wrongAudience', string> = { writer: '', reader: '', other: '', wrongAudience: '' };

async function token(name: string, audiences: string[]): Promise<string> {
  const issued = await kube.core.createNamespacedServiceAccountToken({
    name,
    namespace: ACCOUNTS,
    body: { spec: { audiences, expirationSeconds: 3600 } },
  });
  if (!issued.status?.token) throw new Error(`no token for ${name}`);
  return issued.status.token;
}

test.before(async () => {
  kube = await startKube(shared);
  const kubeconfig = (await kube.identityWith('netplug-flows-readers-test', AGGREGATOR_RULES)).kubeconfig;
  await kube.core.createNamespace({ body: { metadata: { name: ACCOUNTS } } });
  for (const name of ['writer', 'reader', 'other'])
    await kube.core.createNamespacedServiceAccount({ namespace: ACCOUNTS, body: { metadata: { name } } });
  tokens.writer = await token('writer', ['netplug-flows']);
  tokens.reader = await token('reader', ['netplug-flows']);
  tokens.other = await token('other', ['netplug-flows']);
  tokens.wrongAudience = await token('reader', []);

  const [write, read, health] = [await freePort(), await freePort(), await freePort()];
  const lines: string[] = [];
  const stop = new AbortController();
  const exit = runFlowsMain(
    [],
    {
      KUBECONFIG: kubeconfig,
      NETPLUG_FLOWS_LISTEN: `127.0.0.1:${write}`,
      NETPLUG_FLOWS_READ_LISTEN: `127.0.0.1:${read}`,
      NETPLUG_FLOWS_HEALTH_ADDR: `127.0.0.1:${health}`,
      NETPLUG_FLOWS_WRITERS: `${ACCOUNTS}:writer`,
      NETPLUG_FLOWS_READERS: `${ACCOUNTS}:reader`,
    },
    stop.signal,
    { writeLog: (line) => lines.push(line) },
  );
  shared.teardown(async () => {
    stop.abort();
    await exit;
  });
  flows = { write: `http://127.0.0.1:${write}`, read: `http://127.0.0.1:${read}`, lines };
  await eventually('netplug-flows serves', async () => (await fetch(`http://127.0.0.1:${health}/readyz`)).status === 200, {
    context: () => lines.join(''),
  });
});

const headers = (bearer: string | undefined): Record<string, string> => (bearer ? { Authorization: `Bearer ${bearer}` } : {});

async function post(records: FlowRecord[], bearer = tokens.writer): Promise<Response> {
  return fetch(`${flows.write}/v1/flows`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers(bearer) },
    body: JSON.stringify({ records }),
  });
}

test('a reader lists records on the write listener with its token, as the loopback read listener lists them without one', async (t) => {
  const namespace = 'read-list';
  const records = [flowRecord({ source: pod(namespace, 'a', '10.0.0.1'), destination: pod(namespace, 'b', '10.0.0.2', 80) })];
  t.is((await post(records)).status, 200);
  t.true(flows.lines.some((line) => line.includes(`to system:serviceaccount:${ACCOUNTS}:reader`)));

  const answer = await fetch(`${flows.write}/v1/flows?namespace=${namespace}`, { headers: headers(tokens.reader) });
  t.is(answer.status, 200);
  t.deepEqual(((await answer.json()) as { records: FlowRecord[] }).records, records);
  const loopback = await fetch(`${flows.read}/v1/flows?namespace=${namespace}`);
  t.deepEqual(((await loopback.json()) as { records: FlowRecord[] }).records, records);
  // The query is checked as on the read listener.
  const bad = await fetch(`${flows.write}/v1/flows?action=drop`, { headers: headers(tokens.reader) });
  t.is(bad.status, 400);
  t.deepEqual(await bad.json(), { error: 'action "drop" must be Allow or Deny' });
});

test('a reader follows records on the write listener as they arrive', async (t) => {
  const namespace = 'read-follow';
  const stop = new AbortController();
  t.teardown(() => stop.abort());
  const answer = await fetch(`${flows.write}/v1/flows?follow=1&namespace=${namespace}`, {
    headers: headers(tokens.reader),
    signal: stop.signal,
  });
  t.is(answer.status, 200);
  t.is(answer.headers.get('content-type'), 'application/x-ndjson');
  const record = flowRecord({ source: pod(namespace, 'a', '10.0.0.1'), action: 'Deny' });
  t.is((await post([record])).status, 200);
  const reader = (answer.body as ReadableStream<Uint8Array>).getReader();
  let text = '';
  while (!text.includes('\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString('utf8');
  }
  t.deepEqual(JSON.parse(text.split('\n')[0] as string), record);
});

test('reads on the write listener: 401 without a token, with a bad one or one for another audience; 403 for a writer or another account', async (t) => {
  const url = `${flows.write}/v1/flows?namespace=read-refused`;
  const none = await fetch(url);
  t.is(none.status, 401);
  t.is(none.headers.get('www-authenticate'), 'Bearer realm="netplug-flows"');
  t.regex(((await none.json()) as { error: string }).error, /^no bearer token/);
  t.is((await fetch(url, { headers: headers('not-a-token') })).status, 401);
  const audience = await fetch(url, { headers: headers(tokens.wrongAudience) });
  t.is(audience.status, 401);
  t.regex(((await audience.json()) as { error: string }).error, /not a valid service account token for the audience netplug-flows/);
  for (const who of ['writer', 'other'] as const) {
    const refused = await fetch(url, { headers: headers(tokens[who]) });
    t.is(refused.status, 403, who);
    t.is(
      ((await refused.json()) as { error: string }).error,
      `system:serviceaccount:${ACCOUNTS}:${who} may not read flow records: it is not one of the service accounts NETPLUG_FLOWS_READERS names`,
    );
  }
  // A reader is not a writer.
  const written = await post([flowRecord({ source: pod('read-refused', 'a', '10.0.0.1') })], tokens.reader);
  t.is(written.status, 403);
  t.regex(((await written.json()) as { error: string }).error, /may not write flow records/);
  const held = await fetch(url, { headers: headers(tokens.reader) });
  t.deepEqual(await held.json(), { records: [] });
});
