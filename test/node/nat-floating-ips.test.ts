// The floating IPs' part of netplug's table on a node (pure: no kernel): each floating IP of a pod
// on this node forwarded to the pod's address, at prerouting and output, and a pod's connection to
// its own floating IP given the floating IP as source; other nodes' pods ignored; no floating IP,
// no chain; a floating IP two pods claim goes to one, and that is noted.
import test from 'ava';

import { floatingIpChains, floatingIpsOn } from '../../ts/node/nat/floating-ips.ts';
import { renderRule } from '../../ts/nft/render.ts';
import type { RoutedWorkload } from '../../ts/node/shared/workloads.ts';

const pod = (name: string, node: string, internalIP: string, floating: string[]): RoutedWorkload => ({
  name: `default/${name}`,
  node,
  addresses: [internalIP],
  floatingIps: floating.map((externalIP) => ({ internalIP, externalIP })),
});

test("each floating IP of this node's pods is forwarded to the pod, at prerouting and at output; other nodes' pods are not", (t) => {
  const { floating, notes } = floatingIpsOn('a', [
    pod('web', 'a', '10.244.0.5', ['10.250.0.2', '10.250.0.1']),
    pod('v6', 'a', 'fd00::5', ['fd00:250::1']),
    pod('elsewhere', 'b', '10.244.1.5', ['10.250.0.3']),
  ]);
  t.deepEqual(notes, []);
  const chains = floatingIpChains(floating);
  t.deepEqual(
    chains.map((chain) => [chain.name, chain.base?.hook, chain.base?.priority]),
    [
      ['floating-ips', 'prerouting', -90],
      ['floating-ips-output', 'output', -90],
      ['floating-ips-hairpin', 'postrouting', 100],
    ],
  );
  t.deepEqual(chains[0]?.rules?.map(renderRule), [
    'ip daddr 10.250.0.1 dnat ip to 10.244.0.5 comment "floating IP of 10.244.0.5"',
    'ip daddr 10.250.0.2 dnat ip to 10.244.0.5 comment "floating IP of 10.244.0.5"',
    'ip6 daddr fd00:250::1 dnat ip6 to fd00::5 comment "floating IP of fd00::5"',
  ]);
  t.deepEqual(chains[1]?.rules, chains[0]?.rules);
  t.deepEqual(chains[2]?.rules?.map(renderRule), [
    'ip saddr 10.244.0.5 ip daddr 10.244.0.5 snat ip to 10.250.0.1 comment "to its own floating IP"',
    'ip6 saddr fd00::5 ip6 daddr fd00::5 snat ip6 to fd00:250::1 comment "to its own floating IP"',
  ]);
});

test('no floating IP here, no chain; one floating IP claimed by two pods reaches the first by name, and that is noted', (t) => {
  t.deepEqual(floatingIpChains(floatingIpsOn('a', [pod('elsewhere', 'b', '10.244.1.5', ['10.250.0.3'])]).floating), []);
  const { floating, notes } = floatingIpsOn('a', [
    pod('b', 'a', '10.244.0.6', ['10.250.0.1']),
    pod('a', 'a', '10.244.0.5', ['10.250.0.1']),
  ]);
  t.deepEqual(floating, [{ internalIP: '10.244.0.5', externalIP: '10.250.0.1' }]);
  t.deepEqual(notes, ['floating IP 10.250.0.1 is claimed by default/a and default/b: it reaches default/a']);
});
