// The docs' command blocks as the end-to-end tests read them (command-blocks.ts), the README's
// size, and the relative links of README.md and docs/*.md. No cluster.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

import test from 'ava';

import { anchorOf, commandsOf, sectionBlocks, sections } from './command-blocks.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

const PAGE = `# Title

Intro.

\`\`\`sh
kubectl apply -f a.yaml   # a trailing comment stays
\`\`\`

## Install it

\`\`\`text
$ output sample, not run
\`\`\`

\`\`\`sh
# a comment line is dropped
helm install x chart.tgz -n ns \\
  --set a=b

kubectl wait --for=create thing/x
\`\`\`

### A sub-step

1. Lock:

   \`\`\`sh
   tool lock
   \`\`\`

## Next

\`\`\`yaml
kind: NotRun
\`\`\`

\`\`\`sh
echo '## not a heading'
\`\`\`
`;

test('sh blocks are the commands; other fences are not', (t) => {
  t.deepEqual(sectionBlocks(PAGE, 'Install it'), [
    ['helm install x chart.tgz -n ns --set a=b', 'kubectl wait --for=create thing/x'],
    ['tool lock'],
  ]);
  t.deepEqual(sectionBlocks(PAGE, 'A sub-step'), [['tool lock']]);
  t.deepEqual(sectionBlocks(PAGE, 'Next'), [["echo '## not a heading'"]]);
  t.deepEqual(sectionBlocks(PAGE, 'Title')[0], ['kubectl apply -f a.yaml   # a trailing comment stays']);
  t.is(sectionBlocks(PAGE, 'Title').length, 4, "a section's blocks include its subsections'");
});

test("headings inside blocks are not sections; anchors are GitHub's", (t) => {
  t.deepEqual(
    sections(PAGE).map((section) => [section.level, section.anchor]),
    [
      [1, 'title'],
      [2, 'install-it'],
      [3, 'a-sub-step'],
      [2, 'next'],
    ],
  );
  t.is(anchorOf('Move from etcd to the Kubernetes datastore'), 'move-from-etcd-to-the-kubernetes-datastore');
  t.is(anchorOf('Host-local installs: extra steps'), 'host-local-installs-extra-steps');
});

test('a missing section, a section without commands, an open block or a dangling backslash is an error', (t) => {
  t.throws(() => sectionBlocks(PAGE, 'No such section'), { message: /0 sections titled/ });
  t.throws(() => sectionBlocks('## Empty\n\n```text\nx\n```\n', 'Empty'), { message: /has no sh block/ });
  t.throws(() => sections('## A\n\n```sh\nls\n'), { message: /not closed/ });
  t.throws(() => commandsOf(['ls \\'], 0), { message: /backslash/ });
});

test('README.md is at most 12 KB', (t) => {
  const size = statSync(join(ROOT, 'README.md')).size;
  t.true(size <= 12 * 1024, `README.md is ${size} bytes`);
});

const pages = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

test('every relative link of README.md and docs/*.md names a file, and a heading of it when it names one', (t) => {
  const broken: string[] = [];
  for (const page of pages) {
    const text = readFileSync(join(ROOT, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
    for (const [, target = ''] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target)) continue;
      const [path = '', anchor] = target.split('#');
      const file = path === '' ? join(ROOT, page) : join(ROOT, dirname(page), path);
      if (!existsSync(file)) {
        broken.push(`${page}: ${target} (no such file)`);
        continue;
      }
      if (anchor && file.endsWith('.md') && !sections(readFileSync(file, 'utf8')).some((section) => section.anchor === anchor))
        broken.push(`${page}: ${target} (no such heading)`);
    }
  }
  t.deepEqual(broken, []);
});

test('the docs speak in present tense of what is: no history, work items or outside section numbers', (t) => {
  const found: string[] = [];
  for (const page of pages)
    for (const [number, line] of readFileSync(join(ROOT, page), 'utf8').split('\n').entries())
      for (const pattern of [
        /\buntil now\b/i,
        /\bthis stop\b/i,
        /\bwe changed\b/i,
        /§/,
        /\b[A-Z]\.\d+\b/,
        /\bissue \d+\b/i,
        /\bstop \d+\b/i,
      ])
        if (pattern.test(line)) found.push(`${page}:${number + 1}: ${line.trim()}`);
  t.deepEqual(found, []);
});
