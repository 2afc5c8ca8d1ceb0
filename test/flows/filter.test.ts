// The filters of the aggregator's reads and of netplugctl flows (ts/flows/filter.ts): what each
// matches, the query string, and the one-line refusal of each bad value.
import test from 'ava';

import { checkedFilter, FilterError, matchesFilter, parseFlowQuery, policyDisplay } from '../../ts/flows/filter.ts';
import { flowRow as flowRowFor } from '../../ts/flows/table.ts';
import { flowRecord, pod } from './records.ts';

const T = Date.parse('2026-11-28T12:00:00Z');

test('policy display names: ns/name for a NetworkPolicy, name for a global policy or profile', (t) => {
  t.is(policyDisplay('NetworkPolicy/shop/allow-web'), 'shop/allow-web');
  t.is(policyDisplay('GlobalNetworkPolicy/deny-all'), 'deny-all');
  t.is(policyDisplay('Profile/kns.shop'), 'kns.shop');
  t.is(policyDisplay('default-deny'), 'default-deny');
});

test('each filter matches what it names, and all given must hold', (t) => {
  const web = flowRecord({ end: T });
  const other = flowRecord({
    end: T - 60_000,
    node: 'node-b',
    action: 'Deny',
    source: { address: '203.0.113.9', kind: 'external' },
    destination: pod('billing', 'api', '10.244.3.2', 443),
    policy: { policy: 'GlobalNetworkPolicy/deny-outside', tier: 'default', rule: 2, action: 'Deny' },
  });
  const matching = (filter: Parameters<typeof matchesFilter>[1]) =>
    [web, other].filter((record) => matchesFilter(record, filter)).map((record) => record.node);
  t.deepEqual(matching({}), ['node-a', 'node-b']);
  t.deepEqual(matching({ namespace: 'billing' }), ['node-b']);
  t.deepEqual(matching({ namespace: 'shop' }), ['node-a'], 'either end');
  t.deepEqual(matching({ pod: 'shop/client' }), ['node-a'], 'the source');
  t.deepEqual(matching({ pod: 'billing/api' }), ['node-b'], 'the destination');
  t.deepEqual(matching({ pod: 'api' }), ['node-b'], 'a name alone: any namespace');
  t.deepEqual(matching({ pod: 'api', namespace: 'shop' }), [], 'a name alone with a namespace: that namespace');
  t.deepEqual(matching({ pod: 'web', namespace: 'shop' }), ['node-a']);
  t.deepEqual(matching({ policy: 'shop/allow-web' }), ['node-a'], 'display name');
  t.deepEqual(matching({ policy: 'NetworkPolicy/shop/allow-web' }), ['node-a'], 'key');
  t.deepEqual(matching({ policy: 'deny-outside' }), ['node-b']);
  t.deepEqual(matching({ policy: 'allow-web' }), [], 'a namespaced policy needs its namespace');
  t.deepEqual(matching({ action: 'Deny' }), ['node-b']);
  t.deepEqual(matching({ node: 'node-a' }), ['node-a']);
  t.deepEqual(matching({ since: T - 30_000 }), ['node-a'], 'ended after since');
  t.deepEqual(matching({ namespace: 'shop', action: 'Deny' }), [], 'all must hold');
  // An address end is not a pod, whatever its name.
  t.false(matchesFilter(flowRecord({ source: { address: '10.0.0.1', kind: 'hep', name: 'client' } }), { pod: 'client' }));
});

test('the query string: every filter, limit and follow; since as a duration or a time', (t) => {
  const query = parseFlowQuery(
    new URLSearchParams('namespace=shop&pod=shop/web&policy=shop/allow-web&action=deny&node=node-a&since=15m&limit=20&follow=1'),
    T,
  );
  t.deepEqual(query, {
    filter: { namespace: 'shop', pod: 'shop/web', policy: 'shop/allow-web', action: 'Deny', node: 'node-a', since: T - 15 * 60_000 },
    limit: 20,
    follow: true,
  });
  t.deepEqual(parseFlowQuery(new URLSearchParams(''), T), { filter: {}, follow: false });
  t.is(parseFlowQuery(new URLSearchParams('since=2026-11-28T11:00:00Z'), T).filter.since, T - 3_600_000);
  t.is(parseFlowQuery(new URLSearchParams(`since=${T - 5}`), T).filter.since, T - 5);
  t.is(parseFlowQuery(new URLSearchParams('since=90'), T).filter.since, T - 90_000, 'seconds');
  t.deepEqual(parseFlowQuery(new URLSearchParams('namespace=&follow=false'), T), { filter: {}, follow: false }, 'empty is absent');
});

test('a bad value is refused with one line naming the parameter and the value', (t) => {
  const refused = (query: string) => t.throws(() => parseFlowQuery(new URLSearchParams(query), T), { instanceOf: FilterError })?.message;
  t.is(refused('namespace=Shop'), 'namespace "Shop" is not a namespace name');
  t.is(refused('pod=a/b/c'), 'pod "a/b/c" must be NAME or NAMESPACE/NAME');
  t.is(refused('pod=Shop/web'), 'pod "Shop/web" has "Shop", which is not a namespace name');
  t.is(refused('action=drop'), 'action "drop" must be Allow or Deny');
  t.is(refused('node=node_a'), 'node "node_a" is not a node name');
  t.regex(refused('since=yesterday') ?? '', /^since "yesterday" must be a duration such as 15m/);
  t.is(refused('limit=0'), 'limit "0" must be a whole number from 1 to 100000');
  t.is(refused('follow=yes'), 'follow "yes" must be 1, true, 0 or false');
  t.regex(refused('namespaces=shop') ?? '', /^unknown parameter "namespaces": the parameters are namespace, pod/);
  t.is(refused('node=a&node=b'), 'parameter node is given twice');
  // netplugctl names its flags.
  t.is(t.throws(() => checkedFilter({ action: 'drop' }, T, (name) => `--${name}`))?.message, '--action "drop" must be Allow or Deny');
});

test('table rows: ends as ns/pod or address, the destination with its port, the policy by its display name', (t) => {
  t.deepEqual(flowRowFor(flowRecord({ end: T })), [
    '2026-11-28T12:00:00Z',
    'node-a',
    'shop/client',
    'shop/web:8080',
    'TCP',
    'dst',
    'Allow',
    'shop/allow-web',
    '0',
    '3',
    '40',
    '5200',
  ]);
  const external = flowRowFor(
    flowRecord({
      end: T,
      protocol: 58,
      source: { address: 'fd00::1', kind: 'external' },
      destination: { address: 'fd00::2', port: 53, kind: 'net', name: 'dns' },
      policy: { policy: 'default-deny', tier: 'default', action: 'Deny' },
    }),
  );
  t.deepEqual(external.slice(2, 5), ['fd00::1', '[fd00::2]:53', 'ICMPv6']);
  t.deepEqual(external.slice(7, 9), ['default-deny', '-']);
});
