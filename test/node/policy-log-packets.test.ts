// The Log action's packets in netplug-node's log (ts/node/policy/log-packets.ts), on a fake clock
// with packets handed in as the addon hands them: the line a packet makes, the agent's own rate
// limit and the count of lines left out, a group another listener holds (a warning, tried again),
// and the end of the subscription. policy-observed.ts proves the same on a real kernel: a real
// connection's packet, logged by a real Log rule, in the agent's log.
import test from 'ava';

import type { NflogPacket } from '../../ts/dataplane/nftables.ts';
import { DataplaneError } from '../../ts/dataplane/errors.ts';
import { Logger } from '../../ts/log/logger.ts';
import { describePacket, logPolicyPackets } from '../../ts/node/policy/log-packets.ts';
import { FakeClock } from '../helpers/fake-clock.ts';

const tcp: NflogPacket = {
  group: 20,
  prefix: 'netplug shop/web ingress rule 0',
  family: 4,
  inInterface: 'cali1',
  outInterface: 'cali2',
  protocol: 6,
  source: '10.0.0.1',
  destination: '10.0.0.2',
  sourcePort: 40000,
  destinationPort: 80,
  length: 60,
};

function logged() {
  const lines: string[] = [];
  const log = Logger.forProgram('netplug-node', (line) => lines.push(line)).child('policy');
  return { log, lines, text: () => lines.map((line) => line.replace(/^\S+ /, '')).join('') };
}

/** A subscription as the addon makes one: `deliver` stands for the kernel's packets. */
function fakeSubscription() {
  let deliver: (packet: NflogPacket) => void = () => undefined;
  const state = { stopped: false, group: 0 };
  const subscribe = async (group: number, onPacket: (packet: NflogPacket) => void) => {
    state.group = group;
    deliver = onPacket;
    return {
      stop: async () => {
        state.stopped = true;
      },
    };
  };
  return { subscribe, state, deliver: (packet: NflogPacket) => deliver(packet) };
}

test('a packet is one line naming the policy and rule, protocol, both ends and the interfaces', (t) => {
  t.is(describePacket(tcp), 'Log rule shop/web ingress rule 0: tcp 10.0.0.1:40000 -> 10.0.0.2:80 in=cali1 out=cali2');
  t.is(
    describePacket({
      group: 20,
      prefix: 'netplug profile kns.shop egress rule 2',
      family: 6,
      inInterface: 'cali1',
      protocol: 58,
      source: 'fd00::1',
      destination: 'fd00::2',
      icmpType: 128,
      icmpCode: 0,
      length: 104,
    }),
    'Log rule profile kns.shop egress rule 2: icmpv6 fd00::1 -> fd00::2 type 128 code 0 in=cali1',
  );
  t.is(
    describePacket({
      group: 20,
      prefix: 'netplug web egress rule 1',
      family: 6,
      protocol: 17,
      source: 'fd00::1',
      sourcePort: 53,
      length: 90,
    }),
    'Log rule web egress rule 1: udp [fd00::1]:53 -> ?',
    'an address the packet did not give is a question mark',
  );
});

test('lines are limited to the agent’s rate; one line says how many were left out', async (t) => {
  const clock = new FakeClock();
  const { log, lines, text } = logged();
  const nflog = fakeSubscription();
  const packets = logPolicyPackets({ log, group: 7, linesPerSecond: 3, clock, subscribe: nflog.subscribe });
  await clock.advance(0);
  t.is(nflog.state.group, 7);
  t.regex(text(), /^INFO policy: writing the packets of Log rules to this log \(NFLOG group 7\)\n$/);
  lines.length = 0;
  for (let i = 0; i < 10; i++) nflog.deliver(tcp);
  t.is(lines.length, 3, 'a burst of the bucket’s size');
  await clock.advance(1_000);
  t.is(lines.at(-1)?.replace(/^\S+ /, ''), 'INFO policy: 7 more packets of Log rules not written (at most 3 lines a second)\n');
  nflog.deliver(tcp);
  t.is(lines.length, 5, 'a second later the bucket has refilled');
  await packets.stop();
  t.true(nflog.state.stopped);
});

test('a group another listener holds gets one warning and is tried again; policy goes on', async (t) => {
  const clock = new FakeClock();
  const { log, text } = logged();
  const nflog = fakeSubscription();
  let refusals = 2;
  const subscribe: typeof nflog.subscribe = async (group, onPacket) => {
    if (refusals-- > 0)
      throw new DataplaneError({
        code: 'EBUSY',
        errno: 16,
        op: `subscribe to NFLOG group ${group}`,
        message: `subscribe to NFLOG group ${group}: another listener holds the group (or the process lacks CAP_NET_ADMIN)`,
      });
    return nflog.subscribe(group, onPacket);
  };
  const packets = logPolicyPackets({ log, clock, subscribe });
  await clock.advance(0);
  t.regex(
    text(),
    /WARNING policy: cannot read the packets of Log rules \(NFLOG group 20\): .*another listener holds the group.*trying again/,
  );
  await clock.advance(60_000);
  t.is(text().match(/WARNING/g)?.length, 1, 'warned once');
  await clock.advance(60_000);
  t.regex(text(), /INFO policy: writing the packets of Log rules to this log \(NFLOG group 20\)/);
  nflog.deliver(tcp);
  t.regex(text(), /INFO policy: Log rule shop\/web ingress rule 0: /);
  await packets.stop();
  t.true(nflog.state.stopped);
});

test('stopped before the subscription is made, the subscription is ended as it comes', async (t) => {
  const { log } = logged();
  const nflog = fakeSubscription();
  const packets = logPolicyPackets({ log, subscribe: nflog.subscribe });
  await packets.stop();
  t.true(nflog.state.stopped);
});
