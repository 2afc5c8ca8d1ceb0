// The node's addresses as its subsystems read them (LocalAddress; the interfaces a stand-in and
// the clock a counter): reads answer from the last listing, a read past its age starts the next,
// a listing that finds the addresses moved tells the listeners (one that finds a pod's veth more
// does not), and a failed listing is named. And the listing itself, on its worker thread, against
// node:os's in this process; a thread that does not answer is stopped at its deadline.
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';

import test from 'ava';

import { InterfaceLister, listInterfaces } from '../../ts/node/shared/list-interfaces.ts';
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

const quiet = { error: () => undefined, warning: () => undefined, info: () => undefined, debug: () => undefined };

/** A LocalAddress over `list`, with explicit addresses (no Node is read) and a clock the test moves. */
function localAddress(list: () => Interfaces | Promise<Interfaces>) {
  const clock = { ms: 0 };
  const address = new LocalAddress({
    setting: { address: '10.0.0.5', prefixLength: 24 },
    setting6: { address: 'fd00::5', prefixLength: 64 },
    name: 'n1',
    log: quiet,
    informers: undefined as never,
    kube: undefined as never,
    interfaces: list,
    now: () => clock.ms,
  });
  return { address, clock };
}

const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

test('reads answer from the last listing; one past its age lists again, and a move is told to the listeners', async (t) => {
  let listings = 0;
  let now: Interfaces = { eth0: [held('10.0.0.5', 'IPv4', 24), held('fd00::5', 'IPv6', 64)] };
  const { address, clock } = localAddress(async () => {
    listings++;
    return now;
  });
  t.throws(() => address.current(), { message: "the node's interfaces are not listed yet" });
  await address.whenSynced();
  let changes = 0;
  address.onChange(() => changes++);
  t.is(address.current().interface, 'eth0');
  t.is(address.current6()?.address, 'fd00::5');
  t.is(listings, 1, 'one listing for every read within its age');
  t.is(address.current(), address.current(), 'and one search of it per family');

  // The addresses move to another interface: a read within the age still answers from the listing.
  now = { eth1: now['eth0'] };
  clock.ms = 900;
  t.is(address.current().interface, 'eth0');
  await settled();
  t.is(listings, 1);
  // Past it, the read answers from the listing it has and starts the next, which tells the listeners.
  clock.ms = 1100;
  t.is(address.current().interface, 'eth0');
  await settled();
  t.is(listings, 2);
  t.is(changes, 1);
  t.is(address.current().interface, 'eth1');
  t.is(address.current6()?.interface, 'eth1');

  // The same addresses listed again tell no one, nor does a pod's veth come or gone.
  clock.ms = 2200;
  address.current();
  await settled();
  t.is(listings, 3);
  t.is(changes, 1);
  now = { ...now, cali1234567890a: [held('fe80::ecee:eeff:feee:eeee', 'IPv6', 64)] };
  clock.ms = 3300;
  address.current();
  await settled();
  t.is(listings, 4);
  t.is(changes, 1, 'a veth is no move');
  t.is(address.current6()?.interface, 'eth1');

  // The IPv6 address gone: the read after the listing says so, naming the setting.
  now = { eth1: [held('10.0.0.5', 'IPv4', 24)] };
  clock.ms = 4400;
  address.current();
  await settled();
  t.is(changes, 2);
  t.is(address.current().address, '10.0.0.5');
  t.throws(() => address.current6(), { message: /^IP6 fd00::5\/64: no interface of this node holds fd00::5/ });
});

test('a failed listing is named to the reads while there is none, and the last one answers after a failure', async (t) => {
  let fail = true;
  const { address, clock } = localAddress(() => {
    if (fail) throw new Error("cannot list the node's interfaces: the listing thread ended (1)");
    return { eth0: [held('10.0.0.5', 'IPv4', 24), held('fd00::5', 'IPv6', 64)] };
  });
  await address.whenSynced();
  t.throws(() => address.current(), { message: "cannot list the node's interfaces: the listing thread ended (1)" });
  // A failure has no age: the next read starts the next listing, and answers once it is made.
  fail = false;
  t.throws(() => address.current(), { message: /the listing thread ended/ });
  await settled();
  t.is(address.current().interface, 'eth0');
  // A later failure leaves the last listing answering.
  fail = true;
  clock.ms = 5000;
  t.is(address.current().interface, 'eth0');
  await settled();
  t.is(address.current().address, '10.0.0.5');
});

test('the interfaces listed on the worker thread are those node:os lists in this process', async (t) => {
  const [first, second] = await Promise.all([listInterfaces(), listInterfaces()]);
  t.deepEqual(first, networkInterfaces());
  t.deepEqual(second, first);
});

test('a listing thread that does not answer is stopped at the deadline, and the next listing has a thread of its own', async (t) => {
  // Its first listing is never answered; any later one is (on a thread started again).
  const lister = new InterfaceLister({
    deadlineMs: 200,
    source: `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', (id) => { if (id > 0) parentPort.postMessage({ id, interfaces: { lo: [] } }); });
`,
  });
  await t.throwsAsync(lister.list(), {
    message: "cannot list the node's interfaces: no answer in 0.2 s (the listing thread was stopped)",
  });
  t.deepEqual(await lister.list(), { lo: [] });
});
