// The selector language of the reference (pool node selectors, policy selectors): `zone == "a"`,
// `zone != "a"`, `has(zone)`, `!has(zone)`, `zone in {"a", "b"}`, `zone not in {...}`,
// `name contains "x"`, `starts with`, `ends with`, `all()`, `global()` where the caller allows it,
// combined with `&&`, `||`, `!` and parentheses; values in single or double quotes. Parsed into a
// syntax tree (syntax.ts).
import { quote } from '../log/echo.ts';
import { ALL, SelectorError, type Selector } from './syntax.ts';

export { SelectorError } from './syntax.ts';

/** How deeply `(` and `!` may nest: the parser, and whatever walks the tree it builds, recurse per level. */
export const MAX_SELECTOR_DEPTH = 64;

export interface ParseOptions {
  /**
   * Whether `global()` is the global node (a netplug policy's namespaceSelector); elsewhere it is
   * read as any other word, a label key, as the language always read it.
   */
  allowGlobal?: boolean;
}

const TOKEN = /\s*(?:(\(|\)|\{|\}|,|&&|\|\||==|!=|!)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|([A-Za-z0-9_./-]+(?:\(\))?))/y;

/** What a label key must look like to be written in the language (format.ts checks the keys it writes). */
export const LABEL_KEY = /^[A-Za-z0-9_./-]+$/;

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

const MATCHES = { contains: 'contains', starts: 'startsWith', ends: 'endsWith' } as const;

export function parseSelector(source: string, options: ParseOptions = {}): Selector {
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

  // Operands of a chain of `||` (or `&&`) in a list rather than nested nodes: a long chain must
  // not make whatever walks the tree recurse once per operand.
  const expression = (): Selector => {
    const operands = [conjunction()];
    while (peek('||')) {
      position++;
      operands.push(conjunction());
    }
    return operands.length === 1 ? (operands[0] as Selector) : { kind: 'or', operands };
  };
  const conjunction = (): Selector => {
    const operands = [unary()];
    while (peek('&&')) {
      position++;
      operands.push(unary());
    }
    return operands.length === 1 ? (operands[0] as Selector) : { kind: 'and', operands };
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
      return { kind: 'not', operand: deeper(unary) };
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
    if (key === 'all()') return ALL;
    if (key === 'global()' && options.allowGlobal) return { kind: 'global' };
    // `has` not followed by `(` is a label key (Kubernetes allows one named so), as the reference reads it.
    if (key === 'has' && peek('(')) {
      position++;
      const name = word();
      take(')');
      return { kind: 'has', key: name };
    }
    const next = peek();
    if (next?.text === '==' || next?.text === '!=') {
      position++;
      return { kind: next.text === '==' ? 'equals' : 'notEquals', key, value: string() };
    }
    if (next?.text === 'in' || next?.text === 'not') {
      position++;
      if (next.text === 'not') take('in');
      return { kind: next.text === 'not' ? 'notIn' : 'in', key, values: set() };
    }
    if (next?.text === 'contains' || next?.text === 'starts' || next?.text === 'ends') {
      position++;
      if (next.text !== 'contains') take('with');
      return { kind: MATCHES[next.text], key, value: string() };
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

  if (tokens.length === 0) return ALL; // an empty selector selects every object
  const selector = expression();
  if (position < tokens.length) fail('unexpected');
  return selector;
}
