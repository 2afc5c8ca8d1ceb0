// The node's addresses as its subsystems read them (LocalAddress, pure: the interfaces are a
// stand-in): one listing of the interfaces serves every read of a turn of the event loop, and the
// next turn lists them again, so a changed address is seen by the next read that follows it.
import type { NetworkInterfaceInfo } from 'node:os';

import test from 'ava';

import type { Interfaces } from '../../ts/node/shared/node-address.ts';
import { LocalAddress } from '../../ts/node/shared/this-node.ts';

const held = (address: string, family: 'IPv4' | 'IPv6', prefix: number): NetworkInterfaceInfo =>
  ({
    address,
    family,
    cidr: `${address}/${prefix}`,
    internal: false,
    netmask: '',
    mac: '00:00:00:00:00:01',
    scopeid: 0,
  }) as NetworkInterfaceInfo;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

test('the interfaces are listed once per turn, for both families and every reader, and again at the next turn', async (t) => {
  let listings = 0;
  let now: Interfaces = { eth0: [held('10.0.0.5', 'IPv4', 24), held('fd00::5', 'IPv6', 64)] };
  const address = new LocalAddress({
    setting: { address: '10.0.0.5', prefixLength: 24 },
    setting6: { address: 'fd00::5', prefixLength: 64 },
    name: 'n1',
    log: { error: () => undefined, warning: () => undefined, info: () => undefined, debug: () => undefined },
    // Explicit addresses: no Node is read for its InternalIPs.
    informers: undefined as never,
    kube: undefined as never,
    interfaces: () => {
      listings++;
      return now;
    },
  });
  t.is(address.current().interface, 'eth0');
  t.is(address.current6()?.address, 'fd00::5');
  t.is(address.current().address, '10.0.0.5');
  t.is(listings, 1, 'one listing for the turn');
  t.is(address.current(), address.current(), 'and one search of it per family');

  // The addresses move to another interface: this turn still reads its listing, the next lists again.
  now = { eth1: now['eth0'] };
  t.is(address.current().interface, 'eth0');
  await nextTurn();
  t.is(address.current().interface, 'eth1');
  t.is(address.current6()?.interface, 'eth1');
  t.is(listings, 2);

  // The IPv6 address gone: the next turn's read says so, naming the setting.
  now = { eth1: [held('10.0.0.5', 'IPv4', 24)] };
  await nextTurn();
  t.is(address.current().address, '10.0.0.5');
  t.throws(() => address.current6(), { message: /^IP6 fd00::5\/64: no interface of this node holds fd00::5/ });
  t.is(listings, 3);
});
