// Node selectors of IP pools, the selector language of the reference: `zone == "a"`,
// `zone != "a"`, `has(zone)`, `!has(zone)`, `zone in {"a", "b"}`, `zone not in {...}`,
// `name contains "x"`, `starts with`, `ends with`, `all()`, combined with `&&`, `||`, `!` and
// parentheses. Parsed once into a predicate over a node's labels.

import { quote } from '../cni/errors.ts';

export type Labels = Readonly<Record<string, string>>;
export type Selector = (labels: Labels) => boolean;

export class SelectorError extends Error {
  override readonly name = 'SelectorError';
}

/** How deeply `(` and `!` may nest: the parser and the predicate it builds recurse per level. */
export const MAX_SELECTOR_DEPTH = 64;

const TOKEN = /\s*(?:(\(|\)|\{|\}|,|&&|\|\||==|!=|!)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|([A-Za-z0-9_./-]+(?:\(\))?))/y;

interface Token {
  text: string;
  kind: 'punct' | 'string' | 'word';
  at: number;
}

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  TOKEN.lastIndex = 0;
  for (;;) {
    if (/^\s*$/.test(source.slice(TOKEN.lastIndex))) return tokens;
    const at = TOKEN.lastIndex;
    const match = TOKEN.exec(source);
    if (!match) throw new SelectorError(`selector ${quote(source)}: unexpected "${source.slice(at).trim().slice(0, 10)}" at ${at}`);
    if (match[1]) tokens.push({ text: match[1], kind: 'punct', at });
    else if (match[2]) tokens.push({ text: match[2].slice(1, -1).replace(/\\(.)/g, '$1'), kind: 'string', at });
    else tokens.push({ text: match[3] as string, kind: 'word', at });
  }
}

export function parseSelector(source: string): Selector {
  const tokens = tokenize(source);
  let position = 0;
  const fail = (what: string): never => {
    const token = tokens[position];
    throw new SelectorError(`selector ${quote(source)}: ${what} ${token ? `at ${quote(token.text)}` : 'at the end'}`);
  };
  const peek = (text?: string) => (text === undefined ? tokens[position] : tokens[position]?.text === text ? tokens[position] : undefined);
  const take = (text: string) => (peek(text) ? tokens[position++] : fail(`expected "${text}"`));
  const word = () => (tokens[position]?.kind === 'word' ? (tokens[position++] as Token).text : fail('expected a label key'));
  const string = () => (tokens[position]?.kind === 'string' ? (tokens[position++] as Token).text : fail('expected a quoted value'));

  // Operands of a chain of `||` (or `&&`) in a list rather than nested closures: a long chain
  // must not make the predicate recurse once per operand.
  const expression = (): Selector => {
    const operands = [conjunction()];
    while (peek('||')) {
      position++;
      operands.push(conjunction());
    }
    return operands.length === 1 ? (operands[0] as Selector) : (labels) => operands.some((operand) => operand(labels));
  };
  const conjunction = (): Selector => {
    const operands = [unary()];
    while (peek('&&')) {
      position++;
      operands.push(unary());
    }
    return operands.length === 1 ? (operands[0] as Selector) : (labels) => operands.every((operand) => operand(labels));
  };
  let depth = 0;
  const deeper = <T>(parse: () => T): T => {
    if (++depth > MAX_SELECTOR_DEPTH) fail(`nests "(" and "!" deeper than ${MAX_SELECTOR_DEPTH} levels`);
    const parsed = parse();
    depth--;
    return parsed;
  };
  const unary = (): Selector => {
    if (peek('!')) {
      position++;
      const inner = deeper(unary);
      return (labels) => !inner(labels);
    }
    return primary();
  };
  const primary = (): Selector => {
    if (peek('(')) {
      position++;
      const inner = deeper(expression);
      take(')');
      return inner;
    }
    const key = word();
    if (key === 'all()') return () => true;
    if (key === 'has') {
      take('(');
      const name = word();
      take(')');
      return (labels) => Object.hasOwn(labels, name);
    }
    const next = peek();
    if (next?.text === '==' || next?.text === '!=') {
      position++;
      const value = string();
      return next.text === '==' ? (labels) => labels[key] === value : (labels) => labels[key] !== value;
    }
    if (next?.text === 'in' || next?.text === 'not') {
      position++;
      const negate = next.text === 'not';
      if (negate) take('in');
      const values = set();
      return (labels) => {
        const value = labels[key];
        return negate ? value === undefined || !values.has(value) : value !== undefined && values.has(value);
      };
    }
    if (next?.text === 'contains' || next?.text === 'starts' || next?.text === 'ends') {
      position++;
      if (next.text !== 'contains') take('with');
      const value = string();
      const test =
        next.text === 'contains'
          ? (v: string) => v.includes(value)
          : next.text === 'starts'
            ? (v: string) => v.startsWith(value)
            : (v: string) => v.endsWith(value);
      return (labels) => labels[key] !== undefined && test(labels[key] as string);
    }
    return fail(`expected an operator after ${quote(key)}`);
  };
  const set = (): Set<string> => {
    take('{');
    const values = new Set<string>();
    if (!peek('}')) {
      values.add(string());
      while (peek(',')) {
        position++;
        values.add(string());
      }
    }
    take('}');
    return values;
  };

  if (tokens.length === 0) return () => true; // an empty selector selects every node
  const selector = expression();
  if (position < tokens.length) fail('unexpected');
  return selector;
}
