// The health checks and the health and metrics server (ts/runtime/health.ts, health-server.ts):
// a polled check is refreshed on its interval and never by a probe (fake clock); /livez, /readyz
// and ?verbose as kube-apiserver answers them; /metrics with the runtime's metrics; what a check
// failed on told to a loopback caller only, tried from a network namespace across a veth.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import test from 'ava';

import { HealthChecks } from '../../ts/runtime/health.ts';
import { isLoopback, serveHealth } from '../../ts/runtime/health-server.ts';
import { RuntimeMetrics } from '../../ts/runtime/metrics.ts';
import { FakeClock, settle } from '../helpers/fake-clock.ts';
import { createNetns, deleteLinkAtTeardown, hostIfname, ip, uniqueSubnet4 } from '../helpers/kernel.ts';

function collect() {
  const lines: string[] = [];
  const at = (level: string) => (message: string) => lines.push(`${level} ${message}`);
  return { lines, log: { error: at('ERROR'), warning: at('WARNING'), info: at('INFO'), debug: at('DEBUG') } };
}

test('a polled check answers probes from its last result, refreshed every interval; a probe that hangs fails after its timeout', async (t) => {
  const clock = new FakeClock();
  const { lines, log } = collect();
  const checks = new HealthChecks({ log, clock });
  let probes = 0;
  let answer: 'ok' | 'refused' | 'hang' = 'ok';
  checks.poll(
    'datastore',
    () => {
      probes++;
      if (answer === 'refused') return Promise.reject(new Error('connect ECONNREFUSED 10.0.0.1:2379'));
      if (answer === 'hang') return new Promise(() => undefined);
      return Promise.resolve();
    },
    { intervalMs: 10_000, timeoutMs: 3000, describe: (err) => `the datastore is unreachable: ${(err as Error).message}` },
  );
  t.deepEqual(checks.results('ready'), [{ name: 'datastore', problem: 'datastore has not been checked yet' }]);
  const stop = new AbortController();
  checks.start(stop.signal);
  await settle();
  t.true(checks.healthy('ready'));
  for (let i = 0; i < 100; i++) checks.results('ready');
  t.is(probes, 1, 'reading the results asks nothing');
  answer = 'refused';
  await clock.advance(9999);
  t.true(checks.healthy('ready'));
  await clock.advance(1);
  t.is(probes, 2);
  t.deepEqual(checks.results('ready'), [
    { name: 'datastore', problem: 'the datastore is unreachable: connect ECONNREFUSED 10.0.0.1:2379' },
  ]);
  answer = 'hang';
  await clock.advance(10_000);
  t.regex(checks.results('ready')[0]?.problem ?? '', /ECONNREFUSED/, 'still the last answer while the probe waits');
  await clock.advance(3000);
  t.is(checks.results('ready')[0]?.problem, 'the datastore is unreachable: no answer within 3 s');
  answer = 'ok';
  await clock.advance(10_000);
  t.true(checks.healthy('ready'));
  t.deepEqual(lines, [
    'WARNING not ready: the datastore is unreachable: connect ECONNREFUSED 10.0.0.1:2379',
    'WARNING not ready: the datastore is unreachable: no answer within 3 s',
    'INFO datastore: healthy again',
  ]);
  stop.abort();
  await checks.stopped();
});

test('set and computed checks, by kind; a first result set by the program is not logged', (t) => {
  const { lines, log } = collect();
  const checks = new HealthChecks({ log });
  let synced = false;
  checks.set('start-up', 'start-up work is not done yet');
  checks.add('cache', () => (synced ? undefined : 'the cache is not complete'));
  checks.set('event-loop', undefined, 'live');
  t.deepEqual(
    checks.results('ready').map((r) => r.name),
    ['start-up', 'cache'],
  );
  t.true(checks.healthy('live'));
  t.false(checks.healthy('ready'));
  synced = true;
  checks.set('start-up', undefined);
  t.true(checks.healthy('ready'));
  t.deepEqual(lines, ['INFO start-up: healthy again']);
});

test('/livez, /readyz (?verbose) and /metrics; details on the loopback; 404 and 405', async (t) => {
  const checks = new HealthChecks({ log: collect().log });
  checks.set('datastore', 'etcd at https://10.0.0.1:2379 is unreachable: connect ECONNREFUSED');
  checks.set('kubernetes-api', undefined);
  const metrics = new RuntimeMetrics();
  metrics.reconciled('node', 'success', 0.01);
  const server = await serveHealth({ host: '127.0.0.1', port: 0 }, { checks, metrics });
  t.teardown(() => server.close());
  const base = `http://127.0.0.1:${server.address.port}`;
  const get = async (path: string, method = 'GET') => {
    const response = await fetch(`${base}${path}`, { method });
    return { code: response.status, text: await response.text(), type: response.headers.get('content-type') ?? '' };
  };
  t.deepEqual(await get('/livez'), { code: 200, text: 'ok\n', type: 'text/plain; charset=utf-8' });
  t.like(await get('/readyz'), {
    code: 503,
    text: '[-]datastore failed: etcd at https://10.0.0.1:2379 is unreachable: connect ECONNREFUSED\nreadyz check failed\n',
  });
  t.like(await get('/readyz?verbose'), {
    code: 503,
    text: '[-]datastore failed: etcd at https://10.0.0.1:2379 is unreachable: connect ECONNREFUSED\n[+]kubernetes-api ok\nreadyz check failed\n',
  });
  checks.set('datastore', undefined);
  t.like(await get('/readyz'), { code: 200, text: 'ok\n' });
  t.like(await get('/readyz?verbose'), { code: 200, text: '[+]datastore ok\n[+]kubernetes-api ok\nreadyz check passed\n' });
  const scraped = await get('/metrics');
  t.is(scraped.code, 200);
  t.regex(scraped.type, /^text\/plain; version=0\.0\.4/);
  t.regex(scraped.text, /netplug_controller_reconcile_total\{controller="node",result="success"\} 1/);
  t.regex(scraped.text, /process_cpu_seconds_total/);
  t.like(await get('/healthz'), { code: 404, text: 'not found: /livez, /readyz, /metrics are served\n' });
  t.like(await get('/readyz', 'POST'), { code: 405 });

  const metricsOnly = await serveHealth({ host: '127.0.0.1', port: 0 }, { checks, metrics, serves: 'metrics' });
  t.teardown(() => metricsOnly.close());
  t.is((await fetch(`http://127.0.0.1:${metricsOnly.address.port}/readyz`)).status, 404, 'the metrics listener serves no probe');
  t.is((await fetch(`http://127.0.0.1:${metricsOnly.address.port}/metrics`)).status, 200);
});

test('a caller off the loopback gets the status and a generic line, never what a check failed on', async (t) => {
  const checks = new HealthChecks({ log: collect().log });
  checks.set('datastore', 'etcd at https://10.0.0.1:2379 is unreachable: connect ECONNREFUSED');
  const server = await serveHealth({ host: '0.0.0.0', port: 0 }, { checks, metrics: new RuntimeMetrics() });
  t.teardown(() => server.close());
  // A pod's view: from another network namespace, over a veth, to the host's address.
  const netns = createNetns(t, 'health');
  const [hostEnd, podEnd] = [hostIfname('nph'), hostIfname('nph')];
  ip(['link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', podEnd]);
  deleteLinkAtTeardown(t, hostEnd);
  ip(['link', 'set', podEnd, 'netns', netns.name]);
  const base = uniqueSubnet4().replace(/\.0\/24$/, '');
  ip(['addr', 'add', `${base}.1/24`, 'dev', hostEnd]);
  ip(['link', 'set', hostEnd, 'up']);
  ip(['addr', 'add', `${base}.2/24`, 'dev', podEnd], netns);
  ip(['link', 'set', podEnd, 'up'], netns);
  // Not execFileSync: the server answers from this process's event loop.
  const curl = async (path: string) =>
    (
      await promisify(execFile)('ip', [
        ...['netns', 'exec', netns.name],
        ...['curl', '-s', '--max-time', '10', '-w', ' %{http_code}', `http://${base}.1:${server.address.port}${path}`],
      ])
    ).stdout;
  t.is(await curl('/readyz'), 'readyz check failed\n 503');
  t.is(await curl('/readyz?verbose'), 'readyz check failed\n 503');
  t.is(await curl('/livez'), 'ok\n 200');
  t.regex(await curl('/metrics'), /netplug_workqueue_depth[\s\S]* 200$/, 'metrics are for Prometheus on the pod network');
});

test('loopback addresses', (t) => {
  for (const address of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1']) t.true(isLoopback(address), address);
  for (const address of ['10.0.0.1', '::ffff:10.0.0.1', 'fd00::1', '', undefined]) t.false(isLoopback(address), String(address));
});
