// The node's addresses as its subsystems read them (LocalAddress; the interfaces a stand-in and
// the clock a counter): reads answer from the last listing, a read past its age starts the next,
// a listing that finds the addresses moved tells the listeners (one that finds a pod's veth more
// does not), and a failed listing is named. And the listing itself, by the addon, against
// node:os's in this process; a failed listing is named (one that gets no answer fails in the addon:
// the netlink sockets' patience, crates/netplug-dataplane/src/netlink.rs).
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';

import { execFileSync } from 'node:child_process';

import test from 'ava';

import { listInterfaces } from '../../ts/node/shared/list-interfaces.ts';
import type { Interfaces } from '../../ts/node/shared/node-address.ts';
import { LocalAddress } from '../../ts/node/shared/this-node.ts';
import { createNetns, ip } from '../helpers/kernel.ts';

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
    if (fail) throw new Error("cannot list the node's interfaces: EMFILE: list the interfaces' addresses");
    return { eth0: [held('10.0.0.5', 'IPv4', 24), held('fd00::5', 'IPv6', 64)] };
  });
  await address.whenSynced();
  t.throws(() => address.current(), { message: "cannot list the node's interfaces: EMFILE: list the interfaces' addresses" });
  // A failure has no age: the next read starts the next listing, and answers once it is made.
  fail = false;
  t.throws(() => address.current(), { message: /EMFILE/ });
  await settled();
  t.is(address.current().interface, 'eth0');
  // A later failure leaves the last listing answering.
  fail = true;
  clock.ms = 5000;
  t.is(address.current().interface, 'eth0');
  await settled();
  t.is(address.current().address, '10.0.0.5');
});

test('the interfaces the addon lists are those node:os lists in this process', async (t) => {
  // As much of node:os's form as autodetection reads, in one order for both.
  const comparable = (interfaces: Interfaces) =>
    Object.entries(interfaces)
      .map(
        ([name, infos]) =>
          [name, (infos ?? []).map(({ address, family, internal, cidr }) => ({ address, family, internal, cidr }))] as const,
      )
      .sort(([a], [b]) => a.localeCompare(b));
  const [first, second] = await Promise.all([listInterfaces(), listInterfaces()]);
  t.deepEqual(comparable(first), comparable(networkInterfaces()));
  t.deepEqual(second, first);
});

test('in a namespace of its own: up interfaces only, both families, the loopback internal, a point-to-point address its local end', async (t) => {
  const netns = createNetns(t, 'listing');
  ip(['link', 'set', 'lo', 'up'], netns);
  ip(['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'peer0'], netns);
  ip(['address', 'add', '10.20.0.5/24', 'dev', 'eth0'], netns);
  ip(['address', 'add', '10.20.0.6/24', 'dev', 'eth0'], netns);
  ip(['address', 'add', 'fd00:20::5/64', 'dev', 'eth0', 'nodad'], netns);
  ip(['address', 'add', '10.30.0.1', 'peer', '10.30.0.2/32', 'dev', 'eth0'], netns);
  ip(['link', 'set', 'eth0', 'up'], netns);
  ip(['link', 'set', 'peer0', 'up'], netns);
  ip(['link', 'add', 'down0', 'type', 'veth', 'peer', 'name', 'down1'], netns);
  ip(['address', 'add', '10.40.0.5/24', 'dev', 'down0'], netns);
  // node:os's listing and the addon's, made in that namespace by a process of its own.
  const script = `
    import { networkInterfaces } from 'node:os';
    import { listInterfaces } from ${JSON.stringify(new URL('../../ts/node/shared/list-interfaces.ts', import.meta.url).pathname)};
    const comparable = (interfaces) => Object.fromEntries(Object.entries(interfaces).sort(([a], [b]) => a.localeCompare(b))
      .map(([name, infos]) => [name, infos.map(({ address, family, internal, cidr }) => ({ address, family, internal, cidr }))]));
    console.log(JSON.stringify({ os: comparable(networkInterfaces()), addon: comparable(await listInterfaces()) }));
  `;
  const { os, addon } = JSON.parse(
    execFileSync('ip', ['netns', 'exec', netns.name, process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8' }),
  );
  t.deepEqual(addon, os);
  t.false('down0' in addon, 'down0 is down: not listed');
  t.deepEqual(
    addon.eth0
      .map((info: { cidr: string }) => info.cidr)
      .filter((cidr: string) => !cidr.startsWith('fe80:'))
      .sort(),
    ['10.20.0.5/24', '10.20.0.6/24', '10.30.0.1/32', 'fd00:20::5/64'],
  );
  t.true(addon.lo.every((info: { internal: boolean }) => info.internal));
});

test('in a namespace of its own: the node address moved to another interface is told to the listeners and read there', async (t) => {
  const netns = createNetns(t, 'moving');
  ip(['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1'], netns);
  ip(['address', 'add', '10.20.0.5/24', 'dev', 'eth0'], netns);
  ip(['link', 'set', 'eth0', 'up'], netns);
  ip(['link', 'set', 'eth1', 'up'], netns);
  // The agent's LocalAddress in a process of that namespace, with IP set: it reads, the address
  // moves (ip, in the same namespace), it reads until a listing has told it.
  const script = `
    import { execFileSync } from 'node:child_process';
    import { LocalAddress } from ${JSON.stringify(new URL('../../ts/node/shared/this-node.ts', import.meta.url).pathname)};
    const quiet = { error() {}, warning() {}, info() {}, debug() {} };
    const address = new LocalAddress({ setting: { address: '10.20.0.5', prefixLength: 24 }, name: 'n1', log: quiet });
    await address.whenSynced();
    const before = address.current().interface;
    let changes = 0;
    address.onChange(() => changes++);
    execFileSync('ip', ['address', 'del', '10.20.0.5/24', 'dev', 'eth0']);
    execFileSync('ip', ['address', 'add', '10.20.0.5/24', 'dev', 'eth1']);
    for (let tries = 0; changes === 0 && tries < 300; tries++) {
      address.current();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    console.log(JSON.stringify({ before, changes, after: address.current().interface }));
  `;
  const seen = JSON.parse(
    execFileSync('ip', ['netns', 'exec', netns.name, process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8' }),
  );
  t.is(seen.before, 'eth0');
  t.true(seen.changes >= 1, 'the move was told');
  t.is(seen.after, 'eth1');
});

test("a listing that fails is named: the addon's error in one line", async (t) => {
  await t.throwsAsync(
    listInterfaces(() => Promise.reject(new Error("EPERM: list the interfaces' addresses"))),
    { message: "cannot list the node's interfaces: EPERM: list the interfaces' addresses" },
  );
});
