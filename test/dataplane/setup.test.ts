// The facade sets up IPv4-only, IPv6-only and dual-stack pods; the kernel state is read back
// through iproute2, sysfs and procfs, and real traffic crosses the veth.
import test from 'ava';

import { checkWorkload, setupWorkload, type WorkloadSpec } from '../../ts/dataplane/index.ts';
import {
  addresses,
  createNetns,
  hostIfname,
  link,
  ping,
  queues,
  routes,
  sysctl,
  uniqueV4,
  uniqueV6,
  type TestNetns,
} from '../helpers/kernel.ts';

const QUEUES_4 = ['rx-0', 'rx-1', 'rx-2', 'rx-3', 'tx-0', 'tx-1', 'tx-2', 'tx-3'];
const LINK_LOCAL = 'fe80::ecee:eeff:feee:eeee';

function podSpec(netns: TestNetns, addrs: string[], extra: Partial<WorkloadSpec> = {}): WorkloadSpec {
  return { netns: netns.path, containerIfname: 'eth0', hostIfname: hostIfname(), addresses: addrs, ...extra };
}

test('IPv4 pod: veth with 4 queues and MTU 1400, /32 address, link-local next hop, sysctls, traffic', async (t) => {
  const netns = createNetns(t, 'v4');
  const ip = uniqueV4();
  const spec = podSpec(netns, [ip], { numQueues: 4, mtu: 1400 });
  const made = await setupWorkload(spec);
  t.is(made.host.name, spec.hostIfname);
  t.is(made.host.mac, 'ee:ee:ee:ee:ee:ee');
  t.is(made.mtu, 1400);

  const host = link(spec.hostIfname);
  t.like(host, { address: 'ee:ee:ee:ee:ee:ee', mtu: 1400, operstate: 'UP', num_tx_queues: 4, num_rx_queues: 4 });
  t.is(host?.linkinfo?.info_kind, 'veth');
  t.deepEqual(queues(spec.hostIfname), QUEUES_4);

  const pod = link('eth0', netns);
  t.like(pod, { mtu: 1400, operstate: 'UP', address: made.container.mac, num_tx_queues: 4, num_rx_queues: 4 });
  t.is(pod?.link_index, host?.ifindex, "eth0's peer is the host end");
  t.deepEqual(queues('eth0', netns), QUEUES_4);

  t.deepEqual(
    addresses('eth0', netns).filter((a) => a.includes('.')),
    [`${ip}/32`],
  );
  t.deepEqual(routes(4, netns).sort(), ['169.254.1.1 dev eth0 scope link', 'default via 169.254.1.1 dev eth0']);
  t.true(routes(4).includes(`${ip} dev ${spec.hostIfname} scope link`));

  t.is(sysctl(`net.ipv4.conf.${spec.hostIfname}.proxy_arp`), '1');
  t.is(sysctl(`net.ipv4.neigh.${spec.hostIfname}.proxy_delay`), '0');
  t.is(sysctl(`net.ipv4.conf.${spec.hostIfname}.forwarding`), '1');
  t.is(sysctl(`net.ipv4.conf.${spec.hostIfname}.route_localnet`), '1');
  t.is(sysctl('net.ipv4.ip_forward', netns), '0');

  t.true(ping(ip), 'the host reaches the pod');
  t.deepEqual(await checkWorkload(spec), []);
});

test('IPv6 pod: /128 without DAD, routes via the host end link-local address, proxy NDP', async (t) => {
  const netns = createNetns(t, 'v6');
  const ip = uniqueV6();
  const spec = podSpec(netns, [ip]);
  await setupWorkload(spec);

  t.true(addresses('eth0', netns).includes(`${ip}/128`), 'usable at once: not tentative');
  t.true(addresses(spec.hostIfname).includes(`${LINK_LOCAL}/64`));
  t.true(routes(6, netns).includes(`default via ${LINK_LOCAL} dev eth0`));
  t.deepEqual(routes(4, netns), []);
  t.true(routes(6).includes(`${ip} dev ${spec.hostIfname}`));
  t.is(sysctl(`net.ipv6.conf.${spec.hostIfname}.proxy_ndp`), '1');
  t.is(sysctl(`net.ipv6.conf.${spec.hostIfname}.forwarding`), '1');
  t.is(sysctl(`net.ipv6.conf.${spec.hostIfname}.accept_ra`), '0');
  t.is(sysctl('net.ipv6.conf.all.forwarding', netns), '0');

  t.true(ping(ip), 'the host reaches the pod over IPv6');
  t.deepEqual(await checkWorkload(spec), []);
});

test('dual-stack pod with allow_ip_forwarding', async (t) => {
  const netns = createNetns(t, 'ds');
  const [v4, v6] = [uniqueV4(), uniqueV6()];
  const spec = podSpec(netns, [v4, v6], { allowIpForwarding: true });
  await setupWorkload(spec);

  const pod = addresses('eth0', netns);
  t.true(pod.includes(`${v4}/32`) && pod.includes(`${v6}/128`), pod.join(', '));
  t.true(routes(4, netns).includes('default via 169.254.1.1 dev eth0'));
  t.true(routes(6, netns).includes(`default via ${LINK_LOCAL} dev eth0`));
  t.is(sysctl('net.ipv4.ip_forward', netns), '1');
  t.is(sysctl('net.ipv6.conf.all.forwarding', netns), '1');
  t.true(ping(v4) && ping(v6));
  t.deepEqual(await checkWorkload(spec), []);
});

test('two pods reach each other through the host', async (t) => {
  const [a, b] = [createNetns(t, 'a'), createNetns(t, 'b')];
  const [ipA, ipB] = [uniqueV4(), uniqueV4()];
  await Promise.all([setupWorkload(podSpec(a, [ipA])), setupWorkload(podSpec(b, [ipB]))]);
  t.true(ping(ipB, a), 'pod a pings pod b');
  t.true(ping(ipA, b), 'pod b pings pod a');
});

test('IPv4 pod with an MTU below 1280 (no IPv6 on its links): set up, checked clean, traffic', async (t) => {
  for (const mtu of [68, 576, 1279]) {
    const netns = createNetns(t, 'v4mtu');
    const ip = uniqueV4();
    const spec = podSpec(netns, [ip], { mtu });
    const made = await setupWorkload(spec);
    t.is(made.mtu, mtu);
    t.like(link(spec.hostIfname), { mtu, operstate: 'UP' });
    t.like(link('eth0', netns), { mtu });
    t.is(sysctl(`net.ipv4.conf.${spec.hostIfname}.proxy_arp`), '1');
    if (mtu >= 576) t.true(ping(ip), `traffic crosses a ${mtu}-byte link`);
    t.deepEqual(await checkWorkload(spec), []);
  }
});
