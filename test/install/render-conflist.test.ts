// The installer's pure parts: placeholder substitution (empty values remove their fields, mtu 0
// dropped, values JSON-escaped inside strings), the built-in template as the plugin parses it,
// bad templates named by their source, Go-style durations, and the token refresh schedule.
import test from 'ava';

import { parseNetconf } from '../../ts/config/netconf.ts';
import { BUILTIN_TEMPLATE } from '../../ts/install/builtin-template.ts';
import { parseDuration } from '../../ts/config/duration.ts';
import { placeholderValues } from '../../ts/install/placeholder-values.ts';
import { nextRefreshMs } from '../../ts/install/refresh-token.ts';
import { renderConflist, TemplateError } from '../../ts/install/render-conflist.ts';
import { readSettings, SettingsError } from '../../ts/install/settings.ts';

const render = (text: string, values: Record<string, string>) => JSON.parse(renderConflist({ text, source: 'a test template' }, values));

test('placeholders are substituted inside and outside strings, values JSON-escaped', (t) => {
  const conflist = render(
    '{"name":"n","plugins":[{"type":"netplug","nodename":"__KUBERNETES_NODE_NAME__","mtu":__CNI_MTU__,"url":"https://__KUBERNETES_SERVICE_HOST__:443","odd":"a\\"__LOG_LEVEL__"}]}',
    {
      KUBERNETES_NODE_NAME: 'node-"1"',
      CNI_MTU: '1450',
      KUBERNETES_SERVICE_HOST: '10.96.0.1',
      LOG_LEVEL: 'debug',
    },
  );
  t.deepEqual(conflist.plugins[0], { type: 'netplug', nodename: 'node-"1"', mtu: 1450, url: 'https://10.96.0.1:443', odd: 'a"debug' });
});

test('an empty value removes its field (quoted, bare or inside a longer string) and array element; mtu 0 is dropped', (t) => {
  const conflist = render(
    '{"name":"n","plugins":[{"type":"netplug","etcd_key_file":"__ETCD_KEY_FILE__","mtu":__CNI_MTU__,"root":"https://__KUBERNETES_SERVICE_HOST__:443","list":["a","__ETCD_KEY_FILE__"],"keep":""},{"type":"portmap","mtu":0}]}',
    { ETCD_KEY_FILE: '', CNI_MTU: '', KUBERNETES_SERVICE_HOST: '' },
  );
  t.deepEqual(conflist.plugins, [{ type: 'netplug', list: ['a'], keep: '' }, { type: 'portmap' }]);
});

test('unknown placeholders stay as written', (t) => {
  t.is(render('{"name":"n","type":"netplug","x":"__NOT_OURS__"}', {}).x, '__NOT_OURS__');
});

test('a template that is not JSON after substitution, or not a conflist, is refused naming its source', (t) => {
  const notJson = t.throws(
    () => renderConflist({ text: '{"plugins": [', source: 'ConfigMap kube-system/netplug-config key cni_network_config' }, {}),
    {
      instanceOf: TemplateError,
    },
  );
  t.regex(
    notJson.message,
    /^the CNI network config template from ConfigMap kube-system\/netplug-config key cni_network_config is not valid JSON/,
  );
  const unknownBare = t.throws(() => renderConflist({ text: '{"type":"netplug","mtu":__NOT_OURS__}', source: 'CNI_NETWORK_CONFIG' }, {}));
  t.regex(unknownBare.message, /from CNI_NETWORK_CONFIG is not valid JSON/);
  const notConflist = t.throws(() => renderConflist({ text: '{"plugins":[{"notype":1}]}', source: 'CNI_NETWORK_CONFIG' }, {}));
  t.regex(notConflist.message, /from CNI_NETWORK_CONFIG is not a CNI network configuration/);
});

test('the built-in template renders to a conflist the plugin accepts, for each datastore', (t) => {
  const kubernetes = readSettings({ KUBERNETES_NODE_NAME: 'node-a', CNI_MTU: '0' });
  const kdd = render(BUILTIN_TEMPLATE, placeholderValues(kubernetes, false));
  t.deepEqual(
    kdd.plugins.map((plugin: { type: string }) => plugin.type),
    ['netplug', 'portmap'],
  );
  const [netplug] = kdd.plugins;
  t.like(netplug, {
    datastore_type: 'kubernetes',
    nodename: 'node-a',
    ipam: { type: 'netplug-ipam' },
    kubernetes: { kubeconfig: '/etc/cni/net.d/netplug-kubeconfig' },
  });
  t.false('mtu' in netplug);
  t.false('etcd_endpoints' in netplug);
  t.notThrows(() => parseNetconf(Buffer.from(JSON.stringify({ cniVersion: kdd.cniVersion, name: kdd.name, ...netplug }))));

  const etcd = readSettings({
    KUBERNETES_NODE_NAME: 'node-a',
    DATASTORE_TYPE: 'etcdv3',
    ETCD_ENDPOINTS: 'https://10.0.0.1:2379',
    CNI_MTU: '1440',
    CNI_NET_DIR: '/etc/kubernetes/cni/net.d',
  });
  const [withEtcd] = render(BUILTIN_TEMPLATE, placeholderValues(etcd, true)).plugins;
  t.like(withEtcd, {
    datastore_type: 'etcdv3',
    etcd_endpoints: 'https://10.0.0.1:2379',
    etcd_ca_cert_file: '/etc/kubernetes/cni/net.d/netplug-tls/etcd-ca',
    etcd_cert_file: '/etc/kubernetes/cni/net.d/netplug-tls/etcd-cert',
    etcd_key_file: '/etc/kubernetes/cni/net.d/netplug-tls/etcd-key',
    mtu: 1440,
  });
  t.notThrows(() => parseNetconf(Buffer.from(JSON.stringify({ cniVersion: '0.3.1', name: 'k8s-pod-network', ...withEtcd }))));
});

test('settings that cannot be used name the variable and its value', (t) => {
  t.throws(() => placeholderValues(readSettings({ CNI_MTU: 'big' }), false), { instanceOf: SettingsError, message: /CNI_MTU "big"/ });
  t.throws(() => readSettings({ CNI_TOKEN_REFRESH_INTERVAL: 'soon' }), { message: /CNI_TOKEN_REFRESH_INTERVAL "soon"/ });
  t.throws(() => readSettings({ NETPLUG_CNI_TOKEN_SECONDS: '60' }), { message: /NETPLUG_CNI_TOKEN_SECONDS "60".*at least 600/ });
  t.throws(() => readSettings({ CNI_CONF_NAME: '../x.conflist' }), { message: /CNI_CONF_NAME/ });
});

test('durations are Go-style, or seconds', (t) => {
  t.is(parseDuration('90s'), 90_000);
  t.is(parseDuration('1h30m'), 5_400_000);
  t.is(parseDuration('500ms'), 500);
  t.is(parseDuration('2'), 2000);
  t.is(parseDuration('2 minutes'), undefined);
  t.is(parseDuration(''), undefined);
});

test('the token is refreshed after a quarter of its remaining life plus up to as much again, or at the given interval', (t) => {
  const now = 1_000_000;
  const expires = new Date(now + 86_400_000);
  t.is(
    nextRefreshMs(expires, now, undefined, () => 0),
    21_600_000,
  );
  t.is(
    nextRefreshMs(expires, now, undefined, () => 0.999),
    21_600_000 * 1.999,
  );
  t.is(nextRefreshMs(expires, now, 3000), 3000);
  t.is(
    nextRefreshMs(new Date(now + 8000), now, undefined, () => 0),
    5000,
  );
});
