// Pure parts of netplug-kube-controllers' settings: Go durations (LEAK_GRACE_PERIOD).
import test from 'ava';

import { parseDuration } from '../../ts/config/duration.ts';
import { controllersSettings } from '../../ts/controllers/settings.ts';

test('Go durations', (t) => {
  const cases: [string, number | undefined][] = [
    ['15m', 900_000],
    ['1s', 1000],
    ['1h30m', 5_400_000],
    ['1.5s', 1500],
    ['300ms', 300],
    ['2h45m10.5s', 9_910_500],
    ['0', 0],
    ['0s', 0],
    ['', undefined],
    ['15', 15_000], // a bare number is seconds
    ['-1s', undefined],
    ['1d', undefined],
    ['15 m', undefined],
  ];
  for (const [text, ms] of cases) t.is(parseDuration(text), ms, text);
});

test('defaults: etcd, node and ipam, 15 minutes, 0.0.0.0:9094', (t) => {
  const settings = controllersSettings({});
  t.is(settings.datastore.datastore_type, 'etcdv3');
  t.deepEqual([...settings.enabled], ['node', 'ipam']);
  t.is(settings.leakGraceMs, 900_000);
  t.deepEqual(settings.health, { host: '0.0.0.0', port: 9094 });
  t.is(settings.kubeconfig, undefined);
});

test('the environment', (t) => {
  const settings = controllersSettings({
    DATASTORE_TYPE: 'kubernetes',
    KUBECONFIG: '/k',
    ENABLED_CONTROLLERS: 'ipam',
    LEAK_GRACE_PERIOD: '90s',
    NETPLUG_CONTROLLERS_HEALTH_ADDR: '[::1]:9000',
    ETCD_ENDPOINTS: 'https://e:2379',
    ETCD_CA_CERT_FILE: '/ca',
  });
  t.deepEqual(settings.datastore, {
    datastore_type: 'kubernetes',
    etcd_endpoints: 'https://e:2379',
    etcd_ca_cert_file: '/ca',
    kubernetes: { kubeconfig: '/k' },
  });
  t.deepEqual([...settings.enabled], ['ipam']);
  t.is(settings.leakGraceMs, 90_000);
  t.deepEqual(settings.health, { host: '::1', port: 9000 });
});
