// Flow logs without a kernel: the rules' NFLOG prefixes, and records made of logged packets and
// conntrack's counts (ts/policy/flows.ts). test/node/flow-logs.test.ts proves them with real packets.
import test from 'ava';

import { PolicyEngine } from '../../ts/policy/engine.ts';
import { listEndFlowPrefix, parseFlowPrefix, ruleFlowPrefix, tierEndFlowPrefix } from '../../ts/policy/flow-prefix.ts';
import { FlowAggregator, FlowLookup, type TrackedConnection } from '../../ts/policy/flows.ts';
import { hashOf } from '../../ts/policy/names.ts';

const POLICY = 'NetworkPolicy/shop/web';

function setUp() {
  const engine = new PolicyEngine({ nodeName: 'n1', families: [4], flowLogGroup: 21 });
  engine.upsertEndpoint({
    key: 'shop/web',
    namespace: 'shop',
    name: 'web',
    labels: { app: 'web' },
    addresses: ['10.0.0.5'],
    node: 'n1',
    interfaceName: 'calia',
  });
  engine.upsertEndpoint({ key: 'shop/db', namespace: 'shop', name: 'db', labels: { app: 'db' }, addresses: ['10.0.0.6'], node: 'n2' });
  engine.upsertPolicy({
    kind: 'NetworkPolicy',
    apiVersion: 'projectnet.org/v3',
    metadata: { name: 'web', namespace: 'shop' },
    spec: { selector: "app == 'web'", ingress: [{ action: 'Deny', protocol: 'TCP', destination: { ports: [22] } }, { action: 'Allow' }] },
  });
  engine.flush();
  return { engine, aggregator: new FlowAggregator({ node: 'n1', lookup: new FlowLookup(engine) }) };
}

const allowed = (sourcePort: number) => ({
  prefix: ruleFlowPrefix('Allow', 'ingress', hashOf(POLICY), 1),
  protocol: 6,
  source: '10.0.0.6',
  destination: '10.0.0.5',
  sourcePort,
  destinationPort: 80,
  length: 60,
});
const conn = (sourcePort: number, packets: number, bytes: number): TrackedConnection => ({
  protocol: 6,
  source: '10.0.0.6',
  destination: '10.0.0.5',
  sourcePort,
  destinationPort: 80,
  replySource: '10.0.0.5',
  replySourcePort: 80,
  packets,
  bytes,
});

test('the prefixes say what decided, and read back', (t) => {
  t.deepEqual(parseFlowPrefix(ruleFlowPrefix('Deny', 'egress', 'a1b2c3d4e5f60718', 3)), {
    direction: 'egress',
    action: 'Deny',
    policyHash: 'a1b2c3d4e5f60718',
    rule: 3,
  });
  t.deepEqual(parseFlowPrefix(tierEndFlowPrefix('ingress', 'default')), { direction: 'ingress', action: 'Deny', tier: 'default' });
  t.deepEqual(parseFlowPrefix(listEndFlowPrefix('ingress')), { direction: 'ingress', action: 'Deny', end: true });
  t.is(parseFlowPrefix('netplug shop/web ingress rule 0'), undefined, "a Log rule's prefix is not a flow log's");
});

test('with flow logs on, the deciding rules and the drops no rule decided log to the group', (t) => {
  const { engine } = setUp();
  const rules = (engine.part().chains ?? []).flatMap((c) => c.rules ?? []);
  const prefixes = rules.flatMap((r) => (r.statements ?? []).flatMap((s) => ('log' in s && s.log.group === 21 ? [s.log.prefix] : [])));
  t.true(prefixes.includes(ruleFlowPrefix('Deny', 'ingress', hashOf(POLICY), 0)));
  t.true(prefixes.includes(ruleFlowPrefix('Allow', 'ingress', hashOf(POLICY), 1)));
  t.true(prefixes.includes(tierEndFlowPrefix('ingress', 'default')));
  t.true(prefixes.includes(listEndFlowPrefix('egress')));
});

test('allowed flows count their connections and what conntrack says they moved, interval by interval', (t) => {
  const { aggregator } = setUp();
  aggregator.packet(allowed(40000), 1000);
  aggregator.packet(allowed(40001), 1500);
  const [first, ...others] = aggregator.flush(2000, [conn(40000, 10, 1000), conn(40001, 4, 300)]);
  t.is(others.length, 0);
  t.like(first, {
    node: 'n1',
    start: 1000,
    end: 2000,
    source: { address: '10.0.0.6', kind: 'pod', namespace: 'shop', name: 'db', labels: { app: 'db' } },
    destination: { address: '10.0.0.5', port: 80, kind: 'pod', name: 'web' },
    protocol: 6,
    reporter: 'dst',
    action: 'Allow',
    policy: { policy: POLICY, tier: 'default', rule: 1, action: 'Allow' },
    flows: 2,
    packets: 14,
    bytes: 1300,
  });
  // The next interval: no new connection, one of them moved; the other is gone from conntrack.
  const [second] = aggregator.flush(3000, [conn(40000, 15, 1600)]);
  t.like(second, { start: 3000, end: 3000, flows: 0, packets: 5, bytes: 600 });
  t.deepEqual(aggregator.flush(4000, [conn(40001, 9, 900)]), [], 'a connection conntrack lost is followed no more');
});

test('both ends of a connection on this node count it, each in its record', (t) => {
  const { aggregator } = setUp();
  aggregator.packet({ ...allowed(40000), prefix: ruleFlowPrefix('Allow', 'egress', hashOf(POLICY), 0) }, 1000);
  aggregator.packet(allowed(40000), 1000);
  const records = aggregator.flush(2000, [conn(40000, 10, 1000)]);
  t.deepEqual(
    records.map((r) => [r.reporter, r.packets]),
    [
      ['src', 10],
      ['dst', 10],
    ],
  );
});

test('denied flows count attempts by source port and every packet logged', (t) => {
  const { aggregator } = setUp();
  const denied = (sourcePort: number) => ({
    ...allowed(sourcePort),
    prefix: ruleFlowPrefix('Deny', 'ingress', hashOf(POLICY), 0),
    destinationPort: 22,
  });
  aggregator.packet(denied(50000), 10);
  aggregator.packet(denied(50000), 1010);
  aggregator.packet(denied(50001), 1020);
  aggregator.packet({ ...denied(50002), source: '192.0.2.9', prefix: tierEndFlowPrefix('ingress', 'default') }, 1030);
  const records = aggregator.flush(2000, []);
  t.is(records.length, 2);
  t.like(records[0], { action: 'Deny', flows: 2, packets: 3, bytes: 180, policy: { policy: POLICY, rule: 0 } });
  t.like(records[1], {
    action: 'Deny',
    source: { address: '192.0.2.9', kind: 'external' },
    policy: { policy: 'default-deny', tier: 'default' },
  });
});
