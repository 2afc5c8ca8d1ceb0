// Kubernetes label selectors as selector trees: the same matches as Kubernetes' own semantics and
// as the netplug text the reference converts them to, and the same canonical text as that text.
import test from 'ava';

import { matches } from '../../ts/selectors/evaluate.ts';
import { formatSelector } from '../../ts/selectors/format.ts';
import { fromLabelSelector, type LabelSelector } from '../../ts/selectors/label-selector.ts';
import { parseSelector } from '../../ts/selectors/parse.ts';
import { SelectorError, type Labels } from '../../ts/selectors/syntax.ts';
import { Rng } from '../fuzz/lib/prng.ts';
import { KEYS, randomLabels, VALUES } from './random-selectors.ts';

/** Kubernetes' semantics, written out from its API documentation. */
function kubernetesMatches(selector: LabelSelector, labels: Labels): boolean {
  const has = (key: string) => Object.hasOwn(labels, key);
  return (
    Object.entries(selector.matchLabels ?? {}).every(([key, value]) => has(key) && labels[key] === value) &&
    (selector.matchExpressions ?? []).every(({ key, operator, values }) => {
      if (operator === 'In') return has(key) && (values ?? []).includes(labels[key] as string);
      if (operator === 'NotIn') return !has(key) || !(values ?? []).includes(labels[key] as string);
      return operator === 'Exists' ? has(key) : !has(key);
    })
  );
}

/** The netplug text of a label selector, as the reference converts a NetworkPolicy's. */
function netplugText(selector: LabelSelector): string {
  const q = (value: string) => `'${value}'`;
  const terms = [
    ...Object.entries(selector.matchLabels ?? {}).map(([key, value]) => `${key} == ${q(value)}`),
    ...(selector.matchExpressions ?? []).map(({ key, operator, values }) => {
      if (operator === 'In') return `${key} in {${(values ?? []).map(q).join(', ')}}`;
      if (operator === 'NotIn') return `${key} not in {${(values ?? []).map(q).join(', ')}}`;
      return operator === 'Exists' ? `has(${key})` : `! has(${key})`;
    }),
  ];
  return terms.length === 0 ? 'all()' : terms.join(' && ');
}

/** Values the text above holds as they are: no single quote, no backslash (netplug's escape). */
const PLAIN = VALUES.filter((value) => !/['\\]/.test(value));

function randomLabelSelector(rng: Rng): LabelSelector {
  const selector: LabelSelector = {};
  if (rng.chance(0.6)) {
    selector.matchLabels = Object.fromEntries(Array.from({ length: rng.int(3) }, () => [rng.pick(KEYS), rng.pick(PLAIN)]));
  }
  if (rng.chance(0.7)) {
    selector.matchExpressions = Array.from({ length: rng.int(4) }, () => {
      const operator = rng.pick(['In', 'NotIn', 'Exists', 'DoesNotExist']);
      const values = operator === 'In' || operator === 'NotIn' ? Array.from({ length: 1 + rng.int(3) }, () => rng.pick(PLAIN)) : [];
      return { key: rng.pick(KEYS), operator, ...(values.length > 0 || rng.chance(0.5) ? { values } : {}) };
    });
  }
  return selector;
}

test('an empty label selector matches everything; each part maps to its node', (t) => {
  t.deepEqual(fromLabelSelector({}), { kind: 'all' });
  t.deepEqual(fromLabelSelector({ matchLabels: null, matchExpressions: [] }), { kind: 'all' });
  t.true(matches(fromLabelSelector({}), {}));
  t.deepEqual(fromLabelSelector({ matchLabels: { app: 'web' } }), { kind: 'equals', key: 'app', value: 'web' });
  t.deepEqual(
    fromLabelSelector({
      matchLabels: { app: 'web' },
      matchExpressions: [
        { key: 'tier', operator: 'In', values: ['a', 'b'] },
        { key: 'env', operator: 'NotIn', values: ['prod'] },
        { key: 'team', operator: 'Exists' },
        { key: 'legacy', operator: 'DoesNotExist', values: [] },
      ],
    }),
    {
      kind: 'and',
      operands: [
        { kind: 'equals', key: 'app', value: 'web' },
        { kind: 'in', key: 'tier', values: new Set(['a', 'b']) },
        { kind: 'notIn', key: 'env', values: new Set(['prod']) },
        { kind: 'has', key: 'team' },
        { kind: 'not', operand: { kind: 'has', key: 'legacy' } },
      ],
    },
  );
});

test('a label selector the API server would refuse is an error naming the field and value', (t) => {
  const refused = (selector: LabelSelector, message: RegExp) =>
    t.throws(() => fromLabelSelector(selector, 'spec.podSelector'), { instanceOf: SelectorError, message });
  refused(
    { matchExpressions: [{ key: 'a', operator: 'Equals', values: ['x'] }] },
    /^spec\.podSelector\.matchExpressions\[0\]\.operator "Equals" must be one of In, NotIn, Exists, DoesNotExist$/,
  );
  refused(
    { matchExpressions: [{ key: 'a', operator: 'In', values: [] }] },
    /^spec\.podSelector\.matchExpressions\[0\]\.values must not be empty for operator In$/,
  );
  refused(
    { matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] },
    /^spec\.podSelector\.matchExpressions\[0\]\.values must be empty for operator Exists$/,
  );
  refused(
    { matchExpressions: [{ key: 'a b', operator: 'Exists' }] },
    /^spec\.podSelector\.matchExpressions\[0\]\.key: "a b" is not a label key/,
  );
  refused({ matchLabels: { '': 'x' } }, /^spec\.podSelector\.matchLabels: "" is not a label key/);
  t.throws(() => fromLabelSelector(null as unknown as LabelSelector, 'spec.podSelector'), {
    instanceOf: SelectorError,
    message: /^spec\.podSelector is absent: the caller decides/,
  });
});

test('random label selectors: the tree matches as Kubernetes does and as the reference’s netplug text, and formats as that text', (t) => {
  for (let i = 0; i < 3_000; i++) {
    const rng = Rng.forCase('label-selector', i);
    const selector = randomLabelSelector(rng);
    const tree = fromLabelSelector(selector);
    const text = netplugText(selector);
    const parsed = parseSelector(text);
    t.is(formatSelector(tree), formatSelector(parsed), `case ${i}: ${JSON.stringify(selector)}`);
    for (let j = 0; j < 8; j++) {
      const labels = randomLabels(rng);
      const expected = kubernetesMatches(selector, labels);
      if (matches(tree, labels) !== expected || matches(parsed, labels) !== expected)
        t.fail(`case ${i}: ${JSON.stringify(selector)} on ${JSON.stringify(labels)}: Kubernetes says ${expected}`);
    }
  }
});
