// The canonical text of a selector: one text for equal selectors however written, which parses
// back to a selector that matches the same labels and formats the same.
import test from 'ava';

import { matches } from '../../ts/selectors/evaluate.ts';
import { canonicalSelector, formatSelector } from '../../ts/selectors/format.ts';
import { MAX_SELECTOR_DEPTH, parseSelector } from '../../ts/selectors/parse.ts';
import { SelectorError } from '../../ts/selectors/syntax.ts';
import { Rng } from '../fuzz/lib/prng.ts';
import { randomLabels, randomSelector, rewritten } from './random-selectors.ts';

const format = (source: string) => formatSelector(parseSelector(source, { allowGlobal: true }));

test('equal selectors written differently format the same', (t) => {
  const groups = [
    ['', 'all()', '  all()  ', 'all() && all()', '(all())', 'a == "1" || all()'],
    ['zone == "a"', "zone=='a'", '((zone == "a"))', 'zone in {"a"}', 'zone in {"a", "a"}', '!(zone != "a")', '!!zone == "a"'],
    ['zone != "a"', '!(zone == "a")', 'zone not in {"a"}', '!zone in {"a"}'],
    ['a == "1" && b == "2"', 'b == "2" && a == "1"', 'a == "1" && (b == "2" && a == "1")', 'all() && b == "2" && a == "1"'],
    ['a in {"x", "y"}', 'a in {"y", "x"}', "a in {'y','x','y'}", '!(a not in {"x","y"})'],
    ['(a == "1" || b == "2") && c == "3"', 'c == "3" && (b == "2" || a == "1")', 'c == "3" && (b == "2" || (a == "1"))'],
    ['!has(a)', '! has( a )', '!!!has(a)'],
    ['global()', 'global() && all()'],
  ];
  for (const group of groups) {
    const texts = group.map(format);
    t.deepEqual(
      texts,
      group.map(() => texts[0]),
      group.join(' | '),
    );
  }
  t.not(format('a == "1"'), format('a != "1"'));
  t.not(format('has(a)'), format('!has(a)'));
});

test('the canonical text: operands in order of their text, parentheses only where needed, values quoted as the reference reads them', (t) => {
  t.is(format('c == "3" && (b == "2" || a == "1")'), '(a == "1" || b == "2") && c == "3"');
  t.is(format('z == "1" || y == "2" && x == "3"'), 'x == "3" && y == "2" || z == "1"');
  t.is(format('k == \'say "hi"\''), `k == 'say "hi"'`);
  t.is(format('k == "it\'s"'), `k == "it's"`);
  t.is(format(`k == "both ' and \\""`), `k == "both ' and \\""`);
  t.is(format('k == "back\\\\slash"'), 'k == "back\\\\slash"');
  t.is(format('!(a == "1" && b == "2")'), '!(a == "1" && b == "2")');
  t.is(format('!k contains "x"'), '!k contains "x"');
  t.is(format('k starts with "a" && k ends with "z"'), 'k ends with "z" && k starts with "a"');
  t.is(format('k not in {"b", "a"}'), 'k not in {"a", "b"}');
  t.deepEqual(canonicalSelector(parseSelector('b == "2" && a in {"1"}')), {
    kind: 'and',
    operands: [
      { kind: 'equals', key: 'a', value: '1' },
      { kind: 'equals', key: 'b', value: '2' },
    ],
  });
});

test('a key the language cannot write is refused, not written unparsable', (t) => {
  t.throws(() => formatSelector({ kind: 'has', key: 'a b' }), { instanceOf: SelectorError, message: /label key "a b" cannot be written/ });
});

test('a long chain formats without recursing per operand, and parses back', (t) => {
  const source = Array.from({ length: 50_000 }, (_, i) => `k${i} == "v"`).join(' || ');
  const text = format(source);
  t.is(format(text), text);
  t.true(matches(parseSelector(text), { k49999: 'v' }));
});

test('random trees: format parses back to a selector that formats the same and matches the same labels; rewritten, it formats the same', (t) => {
  for (let i = 0; i < 3_000; i++) {
    const rng = Rng.forCase('selector-format', i);
    const selector = randomSelector(rng, 4, true);
    const text = formatSelector(selector);
    const parsed = parseSelector(text, { allowGlobal: true });
    t.is(formatSelector(parsed), text, `case ${i}: ${text}`);
    t.is(formatSelector(rewritten(rng, selector)), text, `case ${i}: ${text}`);
    for (let j = 0; j < 8; j++) {
      const labels = randomLabels(rng);
      const expected = matches(selector, labels);
      if (matches(parsed, labels) !== expected || matches(canonicalSelector(selector), labels) !== expected)
        t.fail(`case ${i}: ${text} on ${JSON.stringify(labels)}`);
    }
  }
});

test('a selector nested to the limit formats to a text that parses', (t) => {
  for (const source of [
    `${'!'.repeat(MAX_SELECTOR_DEPTH)}has(a)`,
    `${'!('.repeat(MAX_SELECTOR_DEPTH / 2)}a == "1" || b == "2"${')'.repeat(MAX_SELECTOR_DEPTH / 2)}`,
    `${'('.repeat(MAX_SELECTOR_DEPTH - 1)}a == "1" && (b == "2" || c == "3")${')'.repeat(MAX_SELECTOR_DEPTH - 1)}`,
  ]) {
    const text = format(source);
    t.is(format(text), text, source);
  }
});
