// What the agent knows (pure logic): a read that began before one of its own commits on the node
// landed does not undo what that commit taught (a block claimed, a block's new revision); a read
// that began after is taken whole.
import test from 'ava';

import { newBlock } from '../../ts/ipam/block.ts';
import { KnownNodes, type NodeFacts } from '../../ts/ipam/known-nodes.ts';
import { keys } from '../../ts/model/keys.ts';
import type { Write } from '../../ts/store/store.ts';

const NODE = 'n1';
const A = '10.0.0.0/26';
const B = '10.0.0.64/26';

const facts = (affinities: string[], blocks: Record<string, string>): NodeFacts => ({
  pools: [],
  node: undefined,
  clusterInfo: undefined,
  affinityKeys: { 4: affinities.map((cidr) => keys.affinity(NODE, cidr)) },
  blocks: Object.fromEntries(
    Object.entries(blocks).map(([cidr, revision]) => [
      cidr,
      { key: keys.block(cidr), value: newBlock(cidr, `host:${NODE}`, new Date(0)), revision },
    ]),
  ),
});

const claim = (cidr: string): Write[] => [
  { key: keys.affinity(NODE, cidr), create: { state: 'confirmed', deleted: false } },
  { key: keys.block(cidr), create: newBlock(cidr, `host:${NODE}`, new Date(0)) },
];
const update = (cidr: string, revision: string): Write[] => [
  { key: keys.block(cidr), update: newBlock(cidr, `host:${NODE}`, new Date(0)), revision },
];

test('a read from before a claim keeps the block claimed; one from before a block write keeps its new revision', (t) => {
  const known = new KnownNodes();
  known.remember(NODE, facts([], {}));
  const before = known.commits(NODE);
  known.committed(NODE, claim(A), { [keys.block(A)]: '5' });
  t.is(known.commits(NODE), before + 1);
  known.remember(NODE, facts([], {}), before);
  t.deepEqual(known.fresh(NODE)?.affinityKeys[4], [keys.affinity(NODE, A)], 'the block claimed is still known');
  t.is(known.fresh(NODE)?.blocks[A]?.revision, '5');

  const beforeUpdate = known.commits(NODE);
  known.committed(NODE, update(A, '5'), { [keys.block(A)]: '9' });
  known.remember(NODE, facts([A], { [A]: '5' }), beforeUpdate);
  t.is(known.fresh(NODE)?.blocks[A]?.revision, '9', 'the revision this agent wrote, not the older one read');

  // A read that began after the commits is taken whole (another writer's change, a block claimed elsewhere).
  known.remember(NODE, facts([A, B], { [A]: '12', [B]: '13' }), known.commits(NODE));
  t.is(known.fresh(NODE)?.blocks[A]?.revision, '12');
  t.deepEqual(known.fresh(NODE)?.affinityKeys[4], [keys.affinity(NODE, A), keys.affinity(NODE, B)]);
});

test('a read from before a claim, when nothing newer is known, is dropped', (t) => {
  const known = new KnownNodes();
  const before = known.commits(NODE);
  known.committed(NODE, claim(A), { [keys.block(A)]: '5' });
  known.remember(NODE, facts([], {}), before);
  t.is(known.fresh(NODE), undefined, 'nothing known: the next ADD reads');
  known.remember(NODE, facts([A], { [A]: '5' }), known.commits(NODE));
  t.deepEqual(known.fresh(NODE)?.affinityKeys[4], [keys.affinity(NODE, A)]);
});
