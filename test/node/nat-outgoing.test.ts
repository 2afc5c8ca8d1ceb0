// A node upgrading from the previous release, which kept natOutgoing in iptables (chain
// NETPLUG-NAT-OUTGOING of the nat table, jumped to from the top of POSTROUTING, made here with
// iptables-restore as that release made it): while a pod keeps opening new flows (one ping each,
// so every one is a new connection masqueraded afresh) to an address outside every pool, the new
// natOutgoing runs on the node. Every ping is answered (the far end has no route to the pods:
// only a masqueraded ping can be), the far end never sees a pod's address, and afterwards the
// masquerade is in netplug's nftables table while the old chain and its jump are gone.
//
// Three namespaces: pod (10.244.3.5) — node (forwarding) — far end (192.168.77.2).
import { execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import test from 'ava';

import { eventually } from '../helpers/eventually.ts';
import { createNetns, ip, nftBinary, requireRoot, type TestNetns } from '../helpers/kernel.ts';

const CHILD = fileURLToPath(new URL('./nat-outgoing-in-netns.ts', import.meta.url));
const POOLS = [{ name: 'default-ipv4-ippool', cidr: '10.244.0.0/16', natOutgoing: true }];

const PREVIOUS_RELEASE = `*nat
:NETPLUG-NAT-OUTGOING - [0:0]
-A NETPLUG-NAT-OUTGOING -d 10.244.0.0/16 -j RETURN
-A NETPLUG-NAT-OUTGOING -s 10.244.0.0/16 -j MASQUERADE
-I POSTROUTING 1 -m comment --comment "netplug: pods of natOutgoing pools" -j NETPLUG-NAT-OUTGOING
COMMIT
`;

const inNs = (netns: TestNetns, command: string[], input?: string) =>
  execFileSync('ip', ['netns', 'exec', netns.name, ...command], { encoding: 'utf8', ...(input === undefined ? {} : { input }) });

function natOutgoing(node: TestNetns): { outcome?: string; legacyRemovedFrom?: string[]; error?: string } {
  return JSON.parse(inNs(node, [process.execPath, CHILD, JSON.stringify(POOLS)]));
}

test("an upgrading node masquerades a pod's new flows without a gap while the old iptables chain goes", async (t) => {
  requireRoot();
  const pod = createNetns(t, 'natpod');
  const node = createNetns(t, 'natnode');
  const far = createNetns(t, 'natfar');
  ip(['link', 'add', 'eth0', 'netns', pod.name, 'type', 'veth', 'peer', 'name', 'pod0', 'netns', node.name]);
  ip(['link', 'add', 'eth1', 'netns', node.name, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', far.name]);
  const sh = (netns: TestNetns, script: string) => inNs(netns, ['sh', '-c', script]);
  sh(pod, 'ip link set lo up && ip addr add 10.244.3.5/24 dev eth0 && ip link set eth0 up && ip route add default via 10.244.3.1');
  sh(
    node,
    'ip addr add 10.244.3.1/24 dev pod0 && ip addr add 192.168.77.1/24 dev eth1 && ip link set pod0 up && ip link set eth1 up && sysctl -qw net.ipv4.ip_forward=1',
  );
  // The far end knows no route to the pods, and counts what arrives by source.
  sh(far, 'ip addr add 192.168.77.2/24 dev eth0 && ip link set eth0 up');
  inNs(
    far,
    [nftBinary(), '-f', '-'],
    `table ip observe {
  counter from-pods { }
  counter from-node { }
  chain input { type filter hook input priority 0; policy accept;
    ip saddr 10.244.0.0/16 counter name "from-pods"
    ip saddr 192.168.77.1 counter name "from-node"
  }
}
`,
  );
  inNs(node, ['iptables-restore', '-w', '5', '--noflush'], PREVIOUS_RELEASE);
  t.regex(inNs(node, ['iptables', '-w', '5', '-t', 'nat', '-S']), /-A POSTROUTING .*-j NETPLUG-NAT-OUTGOING/);

  // The pod's flows: one ping each, until told to stop.
  const flows = spawn('ip', [
    'netns',
    'exec',
    pod.name,
    'bash',
    '--norc',
    '-c',
    'while [ ! -e "$0" ]; do if ping -c 1 -W 1 192.168.77.2 >/dev/null; then echo answered; else echo lost; fi; done',
    `/tmp/netplug-nat-stop-${process.pid}`,
  ]);
  t.teardown(() => flows.kill());
  let results: string[] = [];
  flows.stdout.setEncoding('utf8').on('data', (text: string) => {
    results = results.concat(text.split('\n').filter(Boolean));
  });
  const often = { timeoutMs: 30_000, intervalMs: 50 };
  await eventually('the old chain masqueraded 20 flows', () => results.length >= 20, often);

  const upgraded = natOutgoing(node);
  t.deepEqual(upgraded, { outcome: 'written', legacyRemovedFrom: ['POSTROUTING'] });
  const atUpgrade = results.length;
  await eventually('20 more flows went out after the upgrade', () => results.length >= atUpgrade + 20, often);
  execFileSync('touch', [`/tmp/netplug-nat-stop-${process.pid}`]);
  await new Promise((resolve) => flows.on('exit', resolve));
  execFileSync('rm', ['-f', `/tmp/netplug-nat-stop-${process.pid}`]);

  t.true(results.length >= atUpgrade + 20);
  t.deepEqual(
    results.filter((r) => r !== 'answered'),
    [],
    'every flow was masqueraded and answered',
  );
  const counters = inNs(far, [nftBinary(), 'list', 'counters', 'table', 'ip', 'observe']);
  t.regex(counters, /counter from-pods \{\s+packets 0 bytes 0/, 'the far end never saw a pod address');
  t.regex(counters, /counter from-node \{\s+packets [1-9]/);

  const nat = inNs(node, ['iptables', '-w', '5', '-t', 'nat', '-S']);
  t.notRegex(nat, /NETPLUG-NAT-OUTGOING/, 'the old chain and its jump are gone');
  t.regex(
    inNs(node, [nftBinary(), 'list', 'table', 'inet', 'netplug']),
    /ip saddr 10\.244\.0\.0\/16 masquerade comment "natOutgoing of pool default-ipv4-ippool"/,
  );

  // The agent restarting: the table is written whole again, and nothing is left to remove.
  t.deepEqual(natOutgoing(node), { outcome: 'written' });
});
