// compactHeap (ts/runtime/memory.ts): after a large transient allocation the heap V8 grew to is
// given back, in a process started without --expose-gc (as the executable's are).
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import test from 'ava';

const MEMORY = fileURLToPath(new URL('../../ts/runtime/memory.ts', import.meta.url));

test('a heap grown by garbage shrinks back to what is live', (t) => {
  const script = `
    const { compactHeap } = await import(${JSON.stringify(MEMORY)});
    let keep = [];
    for (let i = 0; i < 200; i++) keep.push(new Array(100_000).fill(i));
    keep = undefined;
    const before = process.memoryUsage().heapTotal;
    compactHeap();
    const after = process.memoryUsage().heapTotal;
    console.log(JSON.stringify({ before, after }));
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  const { before, after } = JSON.parse(out) as { before: number; after: number };
  t.true(before > 100 * 2 ** 20, `the garbage grew the heap (${before} bytes)`);
  t.true(after < before / 4, `compacted: ${after} bytes of ${before}`);
});
