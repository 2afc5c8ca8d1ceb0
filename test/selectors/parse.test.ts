// The selector language: what it parses to, how it evaluates, what it refuses.
import test from 'ava';

import { matches } from '../../ts/selectors/evaluate.ts';
import { parseSelector, SelectorError } from '../../ts/selectors/parse.ts';

test('selectors: the reference language', (t) => {
  const labels = { zone: 'a', 'kubernetes.io/hostname': 'node-1', rack: 'r12' };
  const cases: [string, boolean][] = [
    ['', true],
    ['all()', true],
    ['zone == "a"', true],
    ["zone == 'b'", false],
    ['zone != "b"', true],
    ['has(zone)', true],
    ['!has(gpu)', true],
    ['zone in {"a", "b"}', true],
    ['zone not in {"a"}', false],
    ['missing not in {"a"}', true],
    ['kubernetes.io/hostname == "node-1" && rack starts with "r1"', true],
    ['rack ends with "2" || zone == "z"', true],
    ['!(zone == "a") || rack contains "x"', false],
  ];
  for (const [source, expected] of cases) t.is(matches(parseSelector(source), labels), expected, source);
  t.throws(() => parseSelector('zone = "a"'), { message: /selector "zone = "a"": unexpected/ });
  t.throws(() => parseSelector('zone == a'), { message: /expected a quoted value at "a"/ });
  t.throws(() => parseSelector('has(zone'), { message: /expected "\)" at the end/ });
});

test('selectors: nesting is bounded, long chains evaluate flat, and errors echo a bounded part of the source', (t) => {
  const nested = `${'('.repeat(20_000)}a == "b"${')'.repeat(20_000)}`;
  t.throws(() => parseSelector(nested), { instanceOf: SelectorError, message: /nests "\(" and "!" deeper than 64 levels/ });
  t.throws(() => parseSelector(`${'!'.repeat(20_000)}has(a)`), { instanceOf: SelectorError });
  t.true(matches(parseSelector(`${'!'.repeat(64)}has(a)`), { a: '1' }));
  const chain = parseSelector(Array.from({ length: 50_000 }, (_, i) => `k${i} == "v"`).join(' || '));
  t.true(matches(chain, { k49999: 'v' }));
  t.false(matches(chain, {}));
  const error = t.throws(() => parseSelector(`a == ${'x'.repeat(20_000)}`), { instanceOf: SelectorError });
  t.true((error?.message.length ?? 0) < 600, `${error?.message.length} characters`);
});

test('selectors parse to a tree: chains are one node of every operand, parentheses and sets as written', (t) => {
  t.deepEqual(parseSelector(''), { kind: 'all' });
  t.deepEqual(parseSelector('a == "1" && b != \'2\' && has(c)'), {
    kind: 'and',
    operands: [
      { kind: 'equals', key: 'a', value: '1' },
      { kind: 'notEquals', key: 'b', value: '2' },
      { kind: 'has', key: 'c' },
    ],
  });
  t.deepEqual(parseSelector('a in {"x", "y"} || !(b not in {}) && c starts with "p"'), {
    kind: 'or',
    operands: [
      { kind: 'in', key: 'a', values: new Set(['x', 'y']) },
      {
        kind: 'and',
        operands: [
          { kind: 'not', operand: { kind: 'notIn', key: 'b', values: new Set() } },
          { kind: 'startsWith', key: 'c', value: 'p' },
        ],
      },
    ],
  });
  t.deepEqual(parseSelector('k ends with "s" && k contains "\\"q\\""'), {
    kind: 'and',
    operands: [
      { kind: 'endsWith', key: 'k', value: 's' },
      { kind: 'contains', key: 'k', value: '"q"' },
    ],
  });
});

test('global() is its own node where the caller allows it (a namespaceSelector), a word elsewhere as it always was', (t) => {
  t.deepEqual(parseSelector('global()', { allowGlobal: true }), { kind: 'global' });
  t.deepEqual(parseSelector('global() || a == "b"', { allowGlobal: true }), {
    kind: 'or',
    operands: [{ kind: 'global' }, { kind: 'equals', key: 'a', value: 'b' }],
  });
  t.true(matches(parseSelector('global()', { allowGlobal: true }), {}));
  t.throws(() => parseSelector('global()'), { instanceOf: SelectorError, message: /expected an operator after "global\(\)" at the end/ });
});

test('a label key may be one of the language’s words: has, in, not', (t) => {
  t.deepEqual(parseSelector('has == "x"'), { kind: 'equals', key: 'has', value: 'x' });
  t.deepEqual(parseSelector('has(has) && in in {"a"} && not not in {"b"}'), {
    kind: 'and',
    operands: [
      { kind: 'has', key: 'has' },
      { kind: 'in', key: 'in', values: new Set(['a']) },
      { kind: 'notIn', key: 'not', values: new Set(['b']) },
    ],
  });
  t.throws(() => parseSelector('has zone'), { instanceOf: SelectorError, message: /expected an operator after "has" at "zone"/ });
});

test('labels are own properties: a key such as constructor or __proto__ is absent unless the labels have it', (t) => {
  const labels = { zone: 'a' };
  t.false(matches(parseSelector('constructor contains "x"'), labels));
  t.false(matches(parseSelector('has(toString)'), labels));
  t.true(matches(parseSelector('__proto__ not in {"a"}'), labels));
  t.true(matches(parseSelector('constructor != "x"'), labels));
  t.true(matches(parseSelector('constructor starts with "f"'), JSON.parse('{"constructor": "fine"}')));
});
