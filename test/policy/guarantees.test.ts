// What holds whatever the policies, checked through the compiled tables of generated worlds: replies
// of connections pass (conntrack), the node reaches its own pods (output is not policed), a
// workload interface not in the dispatch maps passes nothing (fail closed), a pod cannot send from
// an address that is not its own (anti-spoofing), and IPv6 neighbour discovery works.
import test from 'ava';

import { generateWorld } from './generate.ts';
import { packetsOf, partsFor } from './harness.ts';
import { interpret, type NftPacket } from './interpret.ts';
import { podProbes } from './generate.ts';

const SEEDS = Array.from({ length: 40 }, (_, i) => 5001 + i);

test('replies and related packets of any flow pass; invalid ones are dropped', (t) => {
  for (const seed of SEEDS) {
    const world = generateWorld(seed, { kubernetesPolicies: 3, netplugPolicies: 3 });
    const parts = partsFor(world);
    for (const probe of podProbes(world)) {
      for (const { node, packet } of packetsOf(probe, 'established'))
        t.is(interpret(parts.get(node as string) ?? {}, packet).verdict, 'accept');
      for (const { node, packet } of packetsOf(probe, 'related'))
        t.is(interpret(parts.get(node as string) ?? {}, packet).verdict, 'accept');
      // An invalid packet is dropped by the first endpoint chain it meets (the uplink's hook has none).
      const [first] = packetsOf(probe, 'invalid');
      if (first) t.is(interpret(parts.get(first.node as string) ?? {}, first.packet).verdict, 'drop');
    }
  }
});

test('the node reaches its own pods (kubelet probes), and their answers come back', (t) => {
  for (const seed of SEEDS) {
    const world = generateWorld(seed, { kubernetesPolicies: 3, netplugPolicies: 3 });
    const parts = partsFor(world);
    for (const pod of world.cluster.pods) {
      const part = parts.get(pod.node) ?? {};
      const probe: NftPacket = {
        hook: 'output',
        oifname: pod.interfaceName,
        family: 4,
        saddr: '10.0.0.254',
        daddr: pod.ipv4,
        l4proto: 6,
        sport: 50000,
        dport: 8080,
        ct: 'new',
      };
      t.is(interpret(part, probe).verdict, 'accept', `${pod.key} from the node`);
      const answer: NftPacket = {
        hook: 'input',
        iifname: pod.interfaceName,
        family: 4,
        saddr: pod.ipv4,
        daddr: '10.0.0.254',
        l4proto: 6,
        sport: 8080,
        dport: 50000,
        ct: 'established',
      };
      t.is(interpret(part, answer).verdict, 'accept', `${pod.key}'s answer`);
    }
  }
});

test('a workload interface not in the dispatch maps passes nothing, in or out', (t) => {
  for (const seed of SEEDS.slice(0, 10)) {
    const world = generateWorld(seed);
    for (const [node, part] of partsFor(world)) {
      const stranger = { family: 4 as const, l4proto: 6, sport: 1000, dport: 80, ct: 'new' as const };
      t.is(
        interpret(part, { ...stranger, hook: 'forward', iifname: 'calinotyet', oifname: 'eth0', saddr: '10.9.0.1', daddr: '10.1.0.1' })
          .verdict,
        'drop',
        node,
      );
      t.is(
        interpret(part, { ...stranger, hook: 'forward', iifname: 'eth0', oifname: 'calinotyet', saddr: '10.1.0.1', daddr: '10.9.0.1' })
          .verdict,
        'drop',
        node,
      );
      t.is(
        interpret(part, { ...stranger, hook: 'input', iifname: 'calinotyet', saddr: '10.9.0.1', daddr: '10.0.0.254' }).verdict,
        'drop',
        node,
      );
      t.is(
        interpret(part, {
          ...stranger,
          ct: 'established',
          hook: 'forward',
          iifname: 'calinotyet',
          oifname: 'eth0',
          saddr: '10.9.0.1',
          daddr: '10.1.0.1',
        }).verdict,
        'drop',
      );
      t.is(
        interpret(part, { ...stranger, hook: 'forward', iifname: 'eth0', oifname: 'eth1', saddr: '10.1.0.1', daddr: '10.9.0.1' }).verdict,
        'accept',
        'not a workload: not ours',
      );
    }
  }
});

test('a pod cannot send from an address that is not its own; IPv6 neighbour discovery passes', (t) => {
  for (const seed of SEEDS.slice(0, 10)) {
    const world = generateWorld(seed, { kubernetesPolicies: 4, netplugPolicies: 2 });
    const parts = partsFor(world);
    for (const pod of world.cluster.pods) {
      const part = parts.get(pod.node) ?? {};
      const other = world.cluster.pods.find((p) => p !== pod) ?? pod;
      for (const ct of ['new', 'established'] as const) {
        const spoofed: NftPacket = {
          hook: 'forward',
          iifname: pod.interfaceName,
          oifname: 'eth0',
          family: 4,
          saddr: other.ipv4,
          daddr: '192.168.5.5',
          l4proto: 17,
          sport: 53,
          dport: 53,
          ct,
        };
        t.is(interpret(part, spoofed).verdict, 'drop', `${pod.key} as ${other.ipv4} (${ct})`);
        t.is(
          interpret(part, { ...spoofed, family: 6, saddr: other.ipv6, daddr: 'fd99::5' }).verdict,
          'drop',
          `${pod.key} as ${other.ipv6}`,
        );
      }
      for (const type of [133, 135, 136]) {
        const nd: NftPacket = {
          hook: 'input',
          iifname: pod.interfaceName,
          family: 6,
          saddr: 'fe80::1',
          daddr: 'ff02::1',
          l4proto: 58,
          icmpType: type,
          icmpCode: 0,
          ct: 'invalid',
        };
        t.is(interpret(part, nd).verdict, 'accept', `${pod.key} neighbour discovery ${type}`);
        t.is(interpret(part, { ...nd, saddr: '::' }).verdict, 'accept', 'duplicate address detection from ::');
      }
    }
  }
});
