// The built netplug-flow-viewer's API and page without a browser: records read through it from the
// built netplug-flows with its reader token; a bad filter 400 in netplug-flows' words; a request
// for another host than localhost refused (DNS rebinding); the page's Content-Security-Policy; a
// token file that is missing, or holds a token netplug-flows refuses, answered 502 naming why, and
// read again once the kubelet would have replaced it; netplug-flows unreachable, 502.
import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';

import test from 'ava';

import { flowRecord, pod } from '../flows/records.ts';
import { freePort } from '../helpers/etcd.ts';
import { eventually } from '../helpers/eventually.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { NETPLUG_FLOW_VIEWER, startViewerCluster, type ViewerCluster } from './cluster.ts';

const shared = sharedTeardowns(test);
let cluster: ViewerCluster;

test.before(async () => {
  cluster = await startViewerCluster(shared);
});

const json = async (answer: Response) => ({ status: answer.status, body: (await answer.json()) as any });

test('the API lists the records netplug-flows holds, and refuses a bad filter in its words', async (t) => {
  const record = flowRecord({ source: pod('api-list', 'a', '10.0.0.1'), action: 'Deny' });
  await cluster.post([record]);
  const listed = await json(await fetch(`${cluster.viewer.url}/api/flows?namespace=api-list`));
  t.deepEqual(listed, { status: 200, body: { records: [record] } });
  t.deepEqual(await json(await fetch(`${cluster.viewer.url}/api/flows?action=drop`)), {
    status: 400,
    body: { error: 'action "drop" must be Allow or Deny' },
  });
  t.deepEqual(await json(await fetch(`${cluster.viewer.url}/api/flows?colour=red`)), {
    status: 400,
    body: { error: 'unknown parameter "colour": the parameters are namespace, pod, policy, action, node, since, limit, follow' },
  });
  t.is((await fetch(`${cluster.viewer.url}/api/flows`, { method: 'POST' })).status, 405);
  t.is((await fetch(`${cluster.viewer.url}/nothing`)).status, 404);
});

test('the page and its assets come from the viewer alone (CSP); another Host than localhost is refused', async (t) => {
  const page = await fetch(`${cluster.viewer.url}/`);
  t.is(page.status, 200);
  t.regex(page.headers.get('content-type') ?? '', /^text\/html/);
  t.regex(page.headers.get('content-security-policy') ?? '', /default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'/);
  const html = await page.text();
  for (const asset of ['viewer.css', 'viewer.js', 'graph.js']) {
    t.true(html.includes(`"${asset}"`), asset);
    t.is((await fetch(`${cluster.viewer.url}/${asset}`)).status, 200, asset);
  }
  t.false(/(src|href)="(https?:)?\/\//.test(html), 'no asset from elsewhere');

  // fetch sets Host from the URL: node's http lets the test send another, as a rebinding page's browser would.
  const port = new URL(cluster.viewer.url).port;
  const rebound = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const request = httpRequest(
      { host: '127.0.0.1', port, path: '/api/flows', headers: { Host: `attacker.example:${port}` } },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
      },
    );
    request.on('error', reject);
    request.end();
  });
  t.is(rebound.status, 421);
  t.regex(rebound.text, /answers requests for localhost only/);
  t.is((await fetch(`http://localhost:${port}/`)).status, 200);
});

test('a missing token file, or a token netplug-flows refuses, is 502 naming why; the file is read again when it changes', async (t) => {
  const tokenFile = join(cluster.dir, 'changing-token');
  const viewer = await cluster.startViewer({ NETPLUG_VIEWER_TOKEN_FILE: tokenFile });
  t.regex(viewer.log(), /cannot read the token file .*changing-token: ENOENT/);
  t.deepEqual(await json(await fetch(`${viewer.url}/api/flows`)), {
    status: 502,
    body: { error: `the viewer has no token for netplug-flows: cannot read the token file ${tokenFile}: ENOENT` },
  });
  // A writer's token is not a reader's.
  writeFileSync(tokenFile, cluster.tokens.node);
  const refused = await json(await fetch(`${viewer.url}/api/flows`));
  t.is(refused.status, 502);
  t.regex(
    refused.body.error,
    /^netplug-flows refused the viewer \(403\): system:serviceaccount:viewer-sa-\d+:node may not read flow records/,
  );
  // The kubelet replaces the projected token: the next request reads the new one.
  rmSync(tokenFile);
  writeFileSync(tokenFile, `${cluster.tokens.viewer}\n`);
  await eventually('the new token read', async () => (await fetch(`${viewer.url}/api/flows`)).status === 200);
  const accepted = await json(await fetch(`${viewer.url}/api/flows`));
  t.is(accepted.status, 200);
  t.true(Array.isArray(accepted.body.records), 'the records netplug-flows holds, read with the new token');
});

test('netplug-flows unreachable: 502 naming its address', async (t) => {
  const nowhere = `http://127.0.0.1:${await freePort()}`;
  const viewer = await cluster.startViewer({ NETPLUG_VIEWER_FLOWS_URL: nowhere });
  const answer = await json(await fetch(`${viewer.url}/api/flows`));
  t.is(answer.status, 502);
  t.regex(answer.body.error, new RegExp(`^cannot reach netplug-flows at ${nowhere}: .*ECONNREFUSED`));
});

test('a bad setting stops the built viewer with one line naming it, exit 1', async (t) => {
  const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    execFile(NETPLUG_FLOW_VIEWER, [], { env: { NETPLUG_VIEWER_LISTEN: 'everywhere' } }, (err, _stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stderr }),
    );
  });
  t.is(result.code, 1);
  const lines = result.stderr.trim().split('\n');
  t.is(lines.length, 1, result.stderr);
  t.regex(lines[0] ?? '', /cannot start: NETPLUG_VIEWER_LISTEN "everywhere" must be host:port, such as 127\.0\.0\.1:9449/);
});
