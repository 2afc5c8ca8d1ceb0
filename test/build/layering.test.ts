// The layering of ts/, read from the import statements of its files (static imports and
// re-exports, `import('…')` and `process.getBuiltinModule('…')`):
//   - the pure layers (data model, selectors, netconf schema, manifest templates, policy
//     compilation, nftables descriptions) reach no I/O, through any chain of imports: no datastore,
//     Kubernetes API, data plane or addon, no Node module that does I/O, no client library;
//     `import type` loads nothing and is allowed;
//   - netplug-node's subsystems (ts/node/<subsystem>/) share code only through ts/node/shared/;
//   - no cycle between the top-level folders of ts/, nor between files.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

import test from 'ava';

const ROOT = new URL('../../', import.meta.url).pathname;
const TS = join(ROOT, 'ts');

const PURE_LAYERS = ['model', 'selectors', 'config', 'render', 'policy', 'nft'];
const IO_LAYERS = ['store', 'k8s', 'dataplane', 'native'];
/** What a pure layer may load from outside ts/: computation only (anything else, node:fs, node:net, etcd3… is I/O). */
const PURE_MODULES = new Set(['node:path', 'node:crypto', 'node:util', 'node:url', 'node:buffer', 'zod', 'zod/mini', 'js-yaml']);
/**
 * Imports of I/O in the pure layers that stay, each with why. The test fails when one goes away,
 * so that the list only shrinks.
 */
const KNOWN_IO: Record<string, { modules: string[]; why: string }> = {
  'ts/config/mtu.ts': {
    modules: ['node:fs'],
    why: 'parseNetconf resolves "mtu": 0 from the node agent\'s file and /proc, /sys; the tests of config/ and plugin/ read them through this file',
  },
  'ts/render/release.ts': {
    modules: ['node:fs', '@kubernetes/client-node'],
    why: "the release files: deploy/'s CRD files and client-node's YAML serializer; the generator and the manifest tests share it",
  },
};

interface Import {
  specifier: string;
  /** `import type` / `export type … from`: erased, loads nothing. */
  typeOnly: boolean;
  /** The file a relative specifier names. */
  file?: string;
}

const sourceFiles = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();

type Token = { kind: 'word' | 'string' | 'punct'; text: string };

/**
 * The source's tokens, enough to find imports: words, string literals (their value) and
 * punctuation, without comments, template text or regular expressions, so that text in them
 * never reads as an import.
 */
function tokens(source: string): Token[] {
  const out: Token[] = [];
  /** Per open template substitution, the brace depth it closes at. */
  const templates: number[] = [];
  let depth = 0;
  let i = 0;
  const template = () => {
    // Template text up to the closing backtick or a substitution.
    while (i < source.length) {
      const c = source[i];
      if (c === '\\') i += 2;
      else if (c === '`') {
        i++;
        out.push({ kind: 'string', text: '' });
        return;
      } else if (c === '$' && source[i + 1] === '{') {
        i += 2;
        templates.push(depth++);
        out.push({ kind: 'punct', text: '(' });
        return;
      } else i++;
    }
  };
  const regexAllowed = () => {
    const last = out.at(-1);
    if (!last) return true;
    if (last.kind === 'word')
      return ['return', 'typeof', 'case', 'in', 'of', 'void', 'throw', 'await', 'yield', 'delete'].includes(last.text);
    if (last.kind === 'string') return false;
    return !/^[)\]}]$/.test(last.text);
  };
  while (i < source.length) {
    const c = source[i]!;
    if (/\s/.test(c)) i++;
    else if (source.startsWith('//', i)) i = source.indexOf('\n', i) === -1 ? source.length : source.indexOf('\n', i);
    else if (source.startsWith('/*', i)) i = source.indexOf('*/', i + 2) + 2 || source.length;
    else if (c === "'" || c === '"') {
      let text = '';
      for (i++; i < source.length && source[i] !== c; i++) text += source[i] === '\\' ? source[++i] : source[i];
      i++;
      out.push({ kind: 'string', text });
    } else if (c === '`') {
      i++;
      template();
    } else if (c === '/' && regexAllowed()) {
      let inClass = false;
      for (i++; i < source.length && (inClass || source[i] !== '/'); i++) {
        if (source[i] === '\\') i++;
        else if (source[i] === '[') inClass = true;
        else if (source[i] === ']') inClass = false;
      }
      i++;
      while (/[a-z]/.test(source[i] ?? '')) i++;
      out.push({ kind: 'string', text: '' });
    } else if (/[\w$]/.test(c)) {
      const word = /^[\w$]+/.exec(source.slice(i, i + 200))![0];
      i += word.length;
      out.push({ kind: 'word', text: word });
    } else {
      i++;
      if (c === '{') depth++;
      else if (c === '}') {
        depth--;
        if (templates.at(-1) === depth) {
          templates.pop();
          out.push({ kind: 'punct', text: ')' });
          template();
          continue;
        }
      }
      out.push({ kind: 'punct', text: c });
    }
  }
  return out;
}

function importsOf(file: string): Import[] {
  const found: Import[] = [];
  const toks = tokens(readFileSync(file, 'utf8'));
  const is = (at: number, text: string) => toks[at]?.text === text && toks[at]?.kind !== 'string';
  const stringAt = (at: number) => (toks[at]?.kind === 'string' ? toks[at].text : undefined);
  for (let at = 0; at < toks.length; at++) {
    const token = toks[at]!;
    if (token.kind !== 'word' || is(at - 1, '.')) continue;
    if (token.text === 'import' && is(at + 1, '(')) {
      const specifier = stringAt(at + 2);
      if (specifier !== undefined && is(at + 3, ')')) found.push({ specifier, typeOnly: false });
    } else if ((token.text === 'import' && !is(at + 1, '.')) || token.text === 'export') {
      // A statement: `import '…'`, or up to `from '…'` before the statement's end.
      const typeOnly = is(at + 1, 'type') && !is(at + 2, 'from') && !is(at + 2, ',') && !is(at + 2, '=');
      if (token.text === 'import' && stringAt(at + 1) !== undefined) {
        found.push({ specifier: stringAt(at + 1)!, typeOnly: false });
        continue;
      }
      if (token.text === 'export' && !is(at + 1, '{') && !is(at + 1, '*') && !(typeOnly && (is(at + 2, '{') || is(at + 2, '*')))) continue;
      for (let end = at + 1; end < toks.length && !is(end, ';'); end++) {
        if (is(end, 'from') && stringAt(end + 1) !== undefined) {
          found.push({ specifier: stringAt(end + 1)!, typeOnly });
          break;
        }
      }
    }
  }
  // process.getBuiltinModule('…') loads a built-in as an import does.
  for (let at = 2; at < toks.length; at++) {
    if (is(at - 2, 'process') && is(at - 1, '.') && is(at, 'getBuiltinModule') && is(at + 1, '(') && stringAt(at + 2) !== undefined) {
      found.push({ specifier: stringAt(at + 2)!, typeOnly: false });
    }
  }
  for (const one of found) if (one.specifier.startsWith('.')) one.file = resolve(dirname(file), one.specifier);
  return found;
}

const FILES = sourceFiles(TS);
const IMPORTS = new Map(FILES.map((file) => [file, importsOf(file)]));
const name = (file: string) => relative(ROOT, file);
/** The top-level folder of ts/ a file is in (a file directly in ts/ is a folder of its own). */
const folderOf = (file: string) => relative(TS, file).split('/')[0]!.replace(/\.ts$/, '');

/** Strongly connected components of more than one node: the cycles. */
function cycles(nodes: string[], edges: (node: string) => Iterable<string>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const to of edges(node)) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const node of nodes) if (!index.has(node)) visit(node);
  return found;
}

test('the import reader finds the imports of ts/, and each relative one names a file', (t) => {
  const all = [...IMPORTS.values()].flat();
  t.true(all.length > 1000, `${all.length} imports`);
  t.true(
    IMPORTS.get(join(TS, 'plugin/main.ts'))!.some((one) => one.specifier === './add.ts'),
    'dynamic imports count',
  );
  t.true(
    IMPORTS.get(join(TS, 'cni/exec.ts'))!.some((one) => one.specifier === 'node:child_process'),
    'process.getBuiltinModule counts',
  );
  t.true(
    IMPORTS.get(join(TS, 'native/addon.ts'))!.some((one) => one.specifier === './binding.d.ts' && one.typeOnly),
    '`import type` is type-only',
  );
  const missing = [...IMPORTS].flatMap(([file, imports]) =>
    imports
      .filter((one) => one.file && !IMPORTS.has(one.file) && !one.file.endsWith('.d.ts'))
      .map((one) => `${name(file)}: ${one.specifier}`),
  );
  t.deepEqual(missing, []);
});

test('the pure layers reach no I/O through any chain of imports', (t) => {
  const violations: string[] = [];
  const known = new Set<string>();
  const isIo = (key: string) => (key.startsWith('/') ? key.startsWith(TS) && IO_LAYERS.includes(folderOf(key)) : !PURE_MODULES.has(key));
  for (const file of FILES.filter((one) => PURE_LAYERS.includes(folderOf(one)))) {
    // Breadth first over what loading the file loads, up to the first I/O on each chain; `via`
    // keeps the first chain to each module.
    const via = new Map<string, string | undefined>([[file, undefined]]);
    const queue = [file];
    while (queue.length > 0) {
      const from = queue.shift()!;
      for (const one of IMPORTS.get(from) ?? []) {
        if (one.typeOnly) continue;
        const key = one.file ?? one.specifier;
        if (KNOWN_IO[name(from)]?.modules.includes(key)) {
          known.add(`${name(from)} → ${key}`);
          continue;
        }
        if (via.has(key)) continue;
        via.set(key, from);
        if (isIo(key)) {
          const chain = [one.file ? name(key) : key];
          for (let at: string | undefined = from; at; at = via.get(at)) chain.unshift(name(at));
          violations.push(chain.join(' → '));
        } else if (one.file && IMPORTS.has(one.file)) queue.push(one.file);
      }
    }
  }
  t.deepEqual(violations, [], 'a pure layer reaches I/O: move the I/O to the layer that does it, or import only types');
  const exceptions = Object.entries(KNOWN_IO).flatMap(([file, { modules }]) => modules.map((module) => `${file} → ${module}`));
  t.deepEqual(
    exceptions.filter((one) => !known.has(one)),
    [],
    'an exception in KNOWN_IO that no longer occurs: remove it',
  );
});

test("netplug-node's subsystems import each other only through ts/node/shared/", (t) => {
  const NODE = join(TS, 'node');
  const subsystemOf = (file: string) => {
    const parts = relative(NODE, file).split('/');
    return parts[0] !== '..' && parts.length > 1 ? parts[0] : undefined;
  };
  const violations = [...IMPORTS].flatMap(([file, imports]) => {
    const subsystem = subsystemOf(file);
    if (!subsystem || subsystem === 'shared') return [];
    return imports
      .filter((one) => one.file?.startsWith(`${NODE}/`) && subsystemOf(one.file) !== subsystem && subsystemOf(one.file) !== 'shared')
      .map((one) => `${name(file)} → ${name(one.file!)}`);
  });
  t.deepEqual(violations, []);
});

test('no two top-level folders of ts/ import each other, directly or around a cycle', (t) => {
  const edges = new Map<string, Set<string>>();
  for (const [file, imports] of IMPORTS) {
    for (const one of imports) {
      if (!one.file || folderOf(one.file) === folderOf(file)) continue;
      const targets = edges.get(folderOf(file)) ?? new Set<string>();
      edges.set(folderOf(file), targets.add(folderOf(one.file)));
    }
  }
  t.deepEqual(
    cycles([...edges.keys()], (folder) => edges.get(folder) ?? []),
    [],
  );
});

test('no file-level import cycle in ts/, type imports included', (t) => {
  const found = cycles(FILES, (file) => (IMPORTS.get(file) ?? []).flatMap((one) => (one.file && IMPORTS.has(one.file) ? [one.file] : [])));
  t.deepEqual(
    found.map((component) => component.map(name)),
    [],
  );
});
