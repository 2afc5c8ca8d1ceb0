// Flow logs without a kernel: the rules' NFLOG prefixes and connection marks, and records made of
// logged packets and the flow tracker's counts (ts/policy/flows.ts). test/node/flow-logs.test.ts proves them with real packets.
import test from 'ava';

import { PolicyEngine } from '../../ts/policy/engine.ts';
import { listEndFlowPrefix, parseFlowPrefix, ruleFlowPrefix, tierEndFlowPrefix } from '../../ts/policy/flow-prefix.ts';
import { flowMark, FlowDecisions, UNNAMED } from '../../ts/policy/flow-decisions.ts';
import { FlowAggregator, FlowLookup } from '../../ts/policy/flows.ts';
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

const deniedPacket = (sourcePort: number) => ({
  prefix: ruleFlowPrefix('Deny', 'ingress', hashOf(POLICY), 0),
  protocol: 6,
  source: '10.0.0.6',
  destination: '10.0.0.5',
  sourcePort,
  destinationPort: 22,
  length: 60,
});
/** What the flow tracker counted for rule `rule` of POLICY deciding `direction` (its number from the engine's rules). */
const counted = (engine: PolicyEngine, direction: 'ingress' | 'egress', rule: number, flows: number, packets: number, bytes: number) => ({
  protocol: 6,
  source: '10.0.0.6',
  destination: '10.0.0.5',
  destinationPort: 80,
  ingress: direction === 'ingress',
  decision: numberIn(engine, direction, rule),
  flows,
  packets,
  bytes,
});

/** The number rule `rule` of POLICY writes into a connection's mark, read from the compiled rules. */
function numberIn(engine: PolicyEngine, direction: 'ingress' | 'egress', rule: number): number {
  const marks = (engine.part().chains ?? [])
    .flatMap((c) => c.rules ?? [])
    .flatMap((r) => (r.statements ?? []).flatMap((s) => ('ctMark' in s ? [s.ctMark] : [])));
  const decisions = new Set<number>();
  for (const mark of marks) {
    const number = direction === 'egress' ? mark.or / 0x10000 : mark.or;
    if (
      (direction === 'egress' ? mark.clear === 0xffff0000 : mark.clear === 0xffff) &&
      engine.flowDecision(direction, number)?.rule === rule
    )
      decisions.add(number);
  }
  if (decisions.size !== 1) throw new Error(`rule ${rule} (${direction}) has ${decisions.size} numbers`);
  return [...decisions][0] as number;
}

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

test('with flow logs on, the rules that deny and the drops no rule decided log to the group; the rules that allow mark the connection', (t) => {
  const { engine } = setUp();
  const rules = (engine.part().chains ?? []).flatMap((c) => c.rules ?? []);
  const prefixes = rules.flatMap((r) => (r.statements ?? []).flatMap((s) => ('log' in s && s.log.group === 21 ? [s.log.prefix] : [])));
  t.true(prefixes.includes(ruleFlowPrefix('Deny', 'ingress', hashOf(POLICY), 0)));
  t.false(prefixes.includes(ruleFlowPrefix('Allow', 'ingress', hashOf(POLICY), 1)), 'an allowed connection is not logged packet by packet');
  t.true(prefixes.includes(tierEndFlowPrefix('ingress', 'default')));
  t.true(prefixes.includes(listEndFlowPrefix('egress')));
  const number = numberIn(engine, 'ingress', 1);
  t.deepEqual(engine.flowDecision('ingress', number), { policyHash: hashOf(POLICY), rule: 1 });
  t.true(number > 0 && number < 0xffff);
});

test("the numbers a direction's rules get are distinct, and the same for the same rules in another engine", (t) => {
  const a = new FlowDecisions();
  const b = new FlowDecisions();
  const numbers = new Set<number>();
  for (let rule = 0; rule < 2000; rule++) numbers.add(a.numberOf('ingress', hashOf(POLICY), rule));
  t.is(numbers.size, 2000);
  t.is(b.numberOf('ingress', hashOf(POLICY), 7), a.numberOf('ingress', hashOf(POLICY), 7));
  t.deepEqual(flowMark('egress', 0xabcd), { clear: 0xffff0000, or: 0xabcd0000 });
  t.deepEqual(flowMark('ingress', 0xabcd), { clear: 0xffff, or: 0xabcd });
});

test('allowed flows count their connections and what they moved, interval by interval', (t) => {
  const { engine, aggregator } = setUp();
  aggregator.packet(deniedPacket(50000), 1000);
  aggregator.counted([counted(engine, 'ingress', 1, 2, 14, 1300)], 2000);
  const [allowedRecord] = aggregator.flush(2000).filter((r) => r.action === 'Allow');
  t.like(allowedRecord, {
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
  // The next interval: no new connection, what the open ones moved.
  aggregator.counted([counted(engine, 'ingress', 1, 0, 5, 600)], 3000);
  t.like(aggregator.flush(3000)[0], { start: 3000, end: 3000, flows: 0, packets: 5, bytes: 600 });
  t.deepEqual(aggregator.flush(4000), [], 'an interval without counts has no records');
});

test('both ends of a connection on this node count it, each in its record; a number no rule has is recorded as unknown', (t) => {
  const { engine, aggregator } = setUp();
  aggregator.counted(
    [counted(engine, 'ingress', 1, 1, 10, 1000), { ...counted(engine, 'ingress', 1, 1, 10, 1000), ingress: false, decision: UNNAMED }],
    2000,
  );
  const records = aggregator.flush(2000);
  t.deepEqual(
    records.map((r) => [r.reporter, r.packets, r.policy.policy]),
    [
      ['dst', 10, POLICY],
      ['src', 10, 'unknown'],
    ],
  );
});

test('denied flows count attempts by source port and every packet logged', (t) => {
  const { aggregator } = setUp();
  aggregator.packet(deniedPacket(50000), 10);
  aggregator.packet(deniedPacket(50000), 1010);
  aggregator.packet(deniedPacket(50001), 1020);
  aggregator.packet({ ...deniedPacket(50002), source: '192.0.2.9', prefix: tierEndFlowPrefix('ingress', 'default') }, 1030);
  const records = aggregator.flush(2000);
  t.is(records.length, 2);
  t.like(records[0], { action: 'Deny', flows: 2, packets: 3, bytes: 180, policy: { policy: POLICY, rule: 0 } });
  t.like(records[1], {
    action: 'Deny',
    source: { address: '192.0.2.9', kind: 'external' },
    policy: { policy: 'default-deny', tier: 'default' },
  });
});
