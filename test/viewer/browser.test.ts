// The flow viewer in a real headless Chromium (Debian's chromium, driven by puppeteer-core; the
// pretest installs it): records posted to the built netplug-flows as a node posts them, read by
// the built netplug-flow-viewer with its reader token, shown on the page: the flows the test made,
// one allowed and one denied by a named policy, the denied one marked with its policy, the graph's
// allowed and denied edges, a filter narrowing the table, a record posted later arriving live.
// The page fetches nothing but its own origin. The screenshot is kept in dist/screenshots/ (with
// NETPLUG_DOCS_SCREENSHOT=1 it replaces docs/images/flow-viewer.png, the one the docs show).
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';

import test from 'ava';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

import { flowRecord, pod } from '../flows/records.ts';
import { ROOT, tempDir } from '../helpers/cni.ts';
import { eventually } from '../helpers/eventually.ts';
import { sharedTeardowns } from '../helpers/shared.ts';
import { startViewerCluster, type ViewerCluster } from './cluster.ts';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = join(ROOT, process.env['NETPLUG_DOCS_SCREENSHOT'] === '1' ? 'docs/images' : 'dist/screenshots', 'flow-viewer.png');

const shared = sharedTeardowns(test);
let cluster: ViewerCluster;

test.before(async () => {
  cluster = await startViewerCluster(shared);
});

const now = Date.now();
const allowed = flowRecord({
  end: now - 2000,
  node: 'node-a',
  source: pod('shop', 'frontend', '10.244.1.5'),
  destination: pod('shop', 'web', '10.244.2.7', 8080),
  policy: { policy: 'NetworkPolicy/shop/allow-frontend', tier: 'default', rule: 0, action: 'Allow' },
});
const denied = flowRecord({
  end: now - 1000,
  node: 'node-b',
  source: pod('ops', 'scanner', '10.244.3.9'),
  destination: pod('shop', 'web', '10.244.2.7', 8080),
  action: 'Deny',
  policy: { policy: 'GlobalNetworkPolicy/deny-scanners', tier: 'security', rule: 1, action: 'Deny' },
  flows: 12,
  packets: 12,
  bytes: 720,
});
const toDatabase = flowRecord({
  end: now,
  node: 'node-b',
  source: pod('shop', 'web', '10.244.2.7'),
  destination: pod('db', 'postgres', '10.244.4.2', 5432),
  policy: { policy: 'NetworkPolicy/db/allow-shop', tier: 'default', rule: 0, action: 'Allow' },
});

interface Row {
  verdict: string;
  denied: boolean;
  text: string;
  policy: string;
}

const rows = (page: Page): Promise<Row[]> =>
  page.$$eval('#flow-rows tr', (trs) =>
    trs.map((tr) => ({
      verdict: tr.getAttribute('data-verdict') ?? '',
      denied: tr.classList.contains('denied'),
      text: tr.textContent ?? '',
      policy: tr.querySelector('.policy')?.textContent ?? '',
    })),
  );

/** Waits until the table's rows pass `check`, and returns them. */
const rowsOnceThere = (page: Page, what: string, check: (shown: Row[]) => boolean) =>
  eventually(what, async () => {
    const shown = await rows(page);
    return check(shown) ? shown : false;
  });

/** The system's Chromium with a profile, home and caches in a directory removed after the file. */
async function openBrowser(): Promise<Browser> {
  const home = tempDir(shared, 'chromium');
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // The test runs as root, where Chromium's sandbox cannot start; /dev/shm may be small in a container.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run', '--lang=en-US'],
    userDataDir: join(home, 'profile'),
    env: { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache') },
  });
  shared.teardown(() => browser.close());
  return browser;
}

test('the page shows the flows posted, the denied one marked with its policy, the graph, filters that narrow, live records', async (t) => {
  await cluster.post([allowed, denied, toDatabase]);
  const browser = await openBrowser();
  const page = await browser.newPage();
  const requested: string[] = [];
  page.on('request', (request) => void requested.push(request.url()));
  const problems: string[] = [];
  page.on('pageerror', (err) => void problems.push(String(err)));
  page.on('console', (message) => void (message.type() === 'error' && problems.push(message.text())));
  await page.setViewport({ width: 1440, height: 900 });
  await page.goto(`${cluster.viewer.url}/`);

  // The flows the test made, newest first.
  const shown = await rowsOnceThere(page, 'the three flows on the page', (found) => found.length === 3);
  t.deepEqual(
    shown.map((row) => row.verdict),
    ['Allow', 'Deny', 'Allow'],
  );
  t.regex(shown[2]?.text ?? '', /shop\/frontend.*shop\/web:8080.*TCP.*default\/shop\/allow-frontend.*rule 0/);
  // The denied flow: marked, with the policy (tier and name) and the rule that denied it.
  const deniedRow = shown[1] as Row;
  t.true(deniedRow.denied);
  t.is(deniedRow.policy, 'denied by security/deny-scanners');
  t.regex(deniedRow.text, /Denied.*ops\/scanner.*shop\/web:8080.*rule 1/);
  t.is(await page.$eval('#status', (element) => element.className), 'status live');

  // The graph: a column per namespace, the denied edge dashed red and labelled with its policy.
  const graph = await page.$eval('#graph', (svg) => ({
    namespaces: [...svg.querySelectorAll('.namespace')].map((group) => group.getAttribute('data-namespace')),
    allow: [...svg.querySelectorAll('path.edge.allow')].map(
      (path) => `${path.getAttribute('data-from')} -> ${path.getAttribute('data-to')}`,
    ),
    deny: [...svg.querySelectorAll('path.edge.deny')].map((path) => `${path.getAttribute('data-from')} -> ${path.getAttribute('data-to')}`),
    labels: [...svg.querySelectorAll('.edge-label')].map((label) => label.textContent),
  }));
  t.deepEqual(graph.namespaces, ['db', 'ops', 'shop']);
  t.deepEqual(graph.allow.sort(), ['pod:shop/frontend -> pod:shop/web', 'pod:shop/web -> pod:db/postgres']);
  t.deepEqual(graph.deny, ['pod:ops/scanner -> pod:shop/web']);
  t.deepEqual(graph.labels, ['✕ deny-scanners']);

  // A record posted now arrives without a reload.
  const live = flowRecord({
    end: Date.now(),
    node: 'node-a',
    source: pod('shop', 'frontend', '10.244.1.5'),
    destination: pod('shop', 'cart', '10.244.2.8', 9000),
    policy: { policy: 'NetworkPolicy/shop/allow-frontend', tier: 'default', rule: 1, action: 'Allow' },
  });
  await cluster.post([live]);
  await rowsOnceThere(page, 'the live record on top', (found) => found.length === 4 && /shop\/cart:9000/.test(found[0]?.text ?? ''));
  mkdirSync(dirname(SCREENSHOT), { recursive: true });
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  t.log(`screenshot: ${SCREENSHOT}`);

  // Filters narrow the table (and the graph): a namespace, then the verdict alone.
  await page.type('input[name="namespace"]', 'ops');
  await page.click('button[type="submit"]');
  const inOps = await rowsOnceThere(page, 'only the flow of namespace ops', (found) => found.length === 1);
  t.regex(inOps[0]?.text ?? '', /ops\/scanner/);
  t.is(await page.$$eval('#graph path.edge', (paths) => paths.length), 1);
  await page.click('button[type="reset"]');
  await rowsOnceThere(page, 'every flow again after Clear', (found) => found.length === 4);
  await page.select('select[name="action"]', 'Deny');
  const deniedOnly = await rowsOnceThere(page, 'the denied flow alone', (found) => found.length === 1);
  t.is(deniedOnly[0]?.policy, 'denied by security/deny-scanners');
  // A filter netplug-flows would refuse is said in one line, not retried.
  await page.click('button[type="reset"]');
  await page.type('input[name="pod"]', 'a/b/c');
  await page.click('button[type="submit"]');
  const said = await eventually('the refused filter said', async () => {
    const status = await page.$eval('#status', (element) => ({ text: element.textContent, className: element.className }));
    return status.className === 'status error' ? status.text : false;
  });
  t.is(said, 'pod "a/b/c" must be NAME or NAMESPACE/NAME');

  // Nothing came from anywhere but the viewer, and the page's scripts raised no error.
  t.deepEqual(
    requested.filter((url) => !url.startsWith(`${cluster.viewer.url}/`) && !url.startsWith('data:')),
    [],
  );
  t.true(requested.some((url) => url.includes('/api/flows?')));
  // The refused filter's 400 is the one console error expected.
  t.deepEqual(
    problems.filter((problem) => !/status of 400/.test(problem)),
    [],
  );
});
