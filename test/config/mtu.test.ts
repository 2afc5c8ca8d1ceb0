// "mtu": 0's sources: the kernel's route tables read from procfs, checked against iproute2's view,
// and the parsing of those tables on samples (several default routes, the IPv6 reject placeholder).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

import test from 'ava';

import { defaultRouteInterface4, defaultRouteInterface6, defaultRouteMtu } from '../../ts/config/mtu.ts';

const ROUTE = `Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth1\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0
eth2\t00000000\t010200C0\t0003\t0\t0\t600\t00000000\t0\t0\t0
eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth3\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0
`;

const IPV6_ROUTE = `fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     ens5
`;

test('the IPv4 default route: destination and mask 0, up, lowest metric', (t) => {
  t.is(defaultRouteInterface4(ROUTE), 'eth0');
  t.is(defaultRouteInterface4(ROUTE.split('\n').slice(0, 2).join('\n')), undefined, 'no default route');
  t.is(defaultRouteInterface4(''), undefined);
});

test("the IPv6 default route, never the kernel's unreachable placeholder on lo", (t) => {
  t.is(defaultRouteInterface6(IPV6_ROUTE), 'ens5');
  t.is(defaultRouteInterface6(IPV6_ROUTE.split('\n').slice(0, 2).join('\n')), undefined);
});

test("this host: the default-route interface's MTU as iproute2 sees it", (t) => {
  const routes = JSON.parse(execFileSync('ip', ['-j', '-4', 'route', 'show', 'default'], { encoding: 'utf8' })) as Array<{ dev: string }>;
  const routes6 = JSON.parse(execFileSync('ip', ['-j', '-6', 'route', 'show', 'default'], { encoding: 'utf8' })) as Array<{ dev: string }>;
  const dev = routes[0]?.dev ?? routes6[0]?.dev;
  const expected = dev ? Number(readFileSync(`/sys/class/net/${dev}/mtu`, 'utf8')) : undefined;
  t.is(defaultRouteMtu(), expected);
});
