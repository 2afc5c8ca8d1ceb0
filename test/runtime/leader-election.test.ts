// Leader election on a Lease (ts/runtime/leader-election.ts) against a real kube-apiserver, two
// candidates in this process with short durations: one leads at a time and the other stands by; a
// leader that stops releases the Lease, so the other takes it at its next retry (the lease
// duration here is far longer than the test waits); a leader cut off from the API server ends its
// term before the other can take the Lease.
import * as k8s from '@kubernetes/client-node';
import test from 'ava';

import { LeaderElector, type LeaderElectionSettings } from '../../ts/runtime/leader-election.ts';
import { tempDir } from '../helpers/cni.ts';
import { type Kube, startKube } from '../helpers/kube.ts';
import { eventually } from '../helpers/eventually.ts';
import { kubeconfigThrough, startRelay } from '../helpers/relay.ts';
import { sharedTeardowns } from '../helpers/shared.ts';

const shared = sharedTeardowns(test);
let kube: Kube;
let config: k8s.KubeConfig;
let coordination: k8s.CoordinationV1Api;

test.before(async () => {
  kube = await startKube(shared);
  config = kube.config;
  coordination = config.makeApiClient(k8s.CoordinationV1Api);
});

const quiet = { error: () => undefined, warning: () => undefined, info: () => undefined, debug: () => undefined };

/** What the candidates did, in order: `<identity> leads`, `<identity> stops`. */
function journal() {
  const events: string[] = [];
  let leading = 0;
  let most = 0;
  const lead = (identity: string) => async (term: AbortSignal) => {
    leading++;
    most = Math.max(most, leading);
    events.push(`${identity} leads`);
    await new Promise((resolve) => term.addEventListener('abort', resolve, { once: true }));
    leading--;
    events.push(`${identity} stops`);
  };
  return { events, lead, most: () => most };
}

function candidate(from: k8s.KubeConfig, settings: Omit<LeaderElectionSettings, 'identity'>, identity: string) {
  const elector = new LeaderElector(from, { ...settings, identity }, { log: quiet });
  const stop = new AbortController();
  return { elector, stop, identity };
}

test('one leads, the other stands by; a leader that stops releases the Lease and the other takes it at its next retry', async (t) => {
  // A minute's lease: without the release the standby would wait longer than this test does.
  const settings = { namespace: 'default', name: 'handover', leaseDurationMs: 60_000, renewDeadlineMs: 40_000, retryPeriodMs: 200 };
  const { events, lead, most } = journal();
  const [a, b] = [candidate(config, settings, 'a'), candidate(config, settings, 'b')];
  const runA = a.elector.run(a.stop.signal, lead('a'));
  await eventually('a leads', () => a.elector.role() === 'leader');
  const runB = b.elector.run(b.stop.signal, lead('b'));
  t.teardown(() => {
    a.stop.abort();
    b.stop.abort();
    return Promise.all([runA, runB]).then(() => undefined);
  });
  await eventually('b stands by', () => b.elector.role() === 'standby');
  t.is(b.elector.holder(), 'a');
  // a renews a few times meanwhile.
  const renewals = new Set<string>();
  await eventually('a renewed the Lease three times', async () => {
    const lease = await coordination.readNamespacedLease({ namespace: 'default', name: 'handover' });
    renewals.add(String(lease.spec?.renewTime));
    return renewals.size >= 3;
  });
  t.deepEqual(events, ['a leads']);

  a.stop.abort();
  await runA;
  await eventually('b leads', () => b.elector.role() === 'leader', { timeoutMs: 30_000 });
  t.deepEqual(events, ['a leads', 'a stops', 'b leads']);
  const lease = await coordination.readNamespacedLease({ namespace: 'default', name: 'handover' });
  t.is(lease.spec?.holderIdentity, 'b');
  t.is(lease.spec?.leaseTransitions, 1);
  t.is(most(), 1, 'never two leaders at once');
});

test('a leader cut off from the API server ends its term before the other takes the Lease', async (t) => {
  const settings = { namespace: 'default', name: 'cut-off', leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 200 };
  const api = await startRelay(t, Number(new URL(kube.server.url).port));
  const relayed = new k8s.KubeConfig();
  relayed.loadFromFile(kubeconfigThrough(api, kube.server.admin.kubeconfig, kube.server.url, tempDir(t, 'kubeconfig')));

  const { events, lead, most } = journal();
  const [a, b] = [candidate(relayed, settings, 'a'), candidate(config, settings, 'b')];
  const runA = a.elector.run(a.stop.signal, lead('a'));
  await eventually('a leads', () => a.elector.role() === 'leader');
  const runB = b.elector.run(b.stop.signal, lead('b'));
  t.teardown(() => {
    a.stop.abort();
    b.stop.abort();
    return Promise.all([runA, runB]).then(() => undefined);
  });
  await eventually('b stands by', () => b.elector.role() === 'standby');

  await api.close();
  await eventually('b leads', () => b.elector.role() === 'leader', { timeoutMs: 60_000 });
  t.deepEqual(events, ['a leads', 'a stops', 'b leads'], "a's term ended before b's began");
  t.is(a.elector.role(), 'unknown');
  await api.open();
  await eventually('a sees b lead', () => a.elector.role() === 'standby' && a.elector.holder() === 'b', { timeoutMs: 60_000 });
  t.is(most(), 1);
});
