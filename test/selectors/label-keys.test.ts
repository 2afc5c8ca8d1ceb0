// What an index of labelled objects learns from a selector: the keys it reads, and the labels
// every object it matches carries.
import test from 'ava';

import { matches } from '../../ts/selectors/evaluate.ts';
import { labelKeys, requiredLabels } from '../../ts/selectors/label-keys.ts';
import { parseSelector } from '../../ts/selectors/parse.ts';
import type { Labels } from '../../ts/selectors/syntax.ts';
import { Rng } from '../fuzz/lib/prng.ts';
import { KEYS, randomLabels, randomSelector, VALUES } from './random-selectors.ts';

const required = (source: string) =>
  Object.fromEntries([...requiredLabels(parseSelector(source))].map(([key, values]) => [key, values && [...values].sort()]));

test('the keys a selector reads', (t) => {
  t.deepEqual([...labelKeys(parseSelector('all()'))], []);
  t.deepEqual([...labelKeys(parseSelector('a == "1" && !(b in {"x"} || has(c)) && d starts with "p" || e != "2"'))].sort(), [
    'a',
    'b',
    'c',
    'd',
    'e',
  ]);
  t.is(labelKeys(parseSelector(Array.from({ length: 50_000 }, (_, i) => `k${i} == "v"`).join(' || '))).size, 50_000);
});

test('the labels every match carries: `&&` narrows, `||` keeps what all its operands require, `!` and `!=` require nothing', (t) => {
  t.deepEqual(required('a == "1"'), { a: ['1'] });
  t.deepEqual(required('a in {"1", "2"} && a in {"2", "3"} && has(b)'), { a: ['2'], b: undefined });
  t.deepEqual(required('a == "1" && a == "2"'), { a: [] });
  t.deepEqual(required('a == "1" && b contains "x" || a == "2"'), { a: ['1', '2'] });
  t.deepEqual(required('a == "1" || has(a) && c == "3"'), { a: undefined });
  t.deepEqual(required('a != "1" && b not in {"x"} && !has(c) && !(d == "4")'), {});
  t.deepEqual(required('all() || a == "1"'), {});
});

test('random trees: a label change outside the keys read never changes the match, and every match carries the required labels', (t) => {
  const satisfies = (labels: Labels, needs: ReturnType<typeof requiredLabels>) =>
    [...needs].every(([key, values]) => Object.hasOwn(labels, key) && (values === undefined || values.has(labels[key] as string)));
  const failures: string[] = [];
  for (let i = 0; i < 3_000; i++) {
    const rng = Rng.forCase('selector-label-keys', i);
    const selector = randomSelector(rng, 4);
    const keys = labelKeys(selector);
    const needs = requiredLabels(selector);
    for (let j = 0; j < 8; j++) {
      const labels = randomLabels(rng);
      const changed: Record<string, string> = { ...labels };
      const untouched = KEYS.filter((key) => !keys.has(key));
      if (untouched.length > 0) {
        const key = rng.pick(untouched);
        if (rng.chance(0.5)) delete changed[key];
        else changed[key] = rng.pick(VALUES);
      }
      const matched = matches(selector, labels);
      if (matches(selector, changed) !== matched) failures.push(`case ${i}: a change outside ${[...keys]} changed the match`);
      if (matched && !satisfies(labels, needs)) failures.push(`case ${i}: ${JSON.stringify(labels)} matches without the required labels`);
    }
  }
  t.deepEqual(failures.slice(0, 8), []);
});
