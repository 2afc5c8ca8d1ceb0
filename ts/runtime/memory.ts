// A resident program's heap after a large transient allocation (netplug-node's first policy pass
// at thousands of policies: every object converted, the whole table described and written): V8
// keeps the pages it grew to, about twice what stays live, and gives them back only to a
// compacting collection, which an idle program never triggers. `compactHeap` runs one.
//
// The executable's V8 flags are fixed (the one-shot plugin's code cache is made under them), so
// the collector is not exposed at start; V8 exposes it to a context made after the flag is set.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Collector = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

let collector: Collector | undefined;

/** A full, compacting collection that returns the heap's free pages to the system (~100 ms at hundreds of MiB). */
export function compactHeap(): void {
  try {
    if (!collector) {
      setFlagsFromString('--expose-gc');
      collector = runInNewContext('gc') as Collector;
    }
    collector({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  } catch {
    // Only a saving: where V8 gives no collector, the heap shrinks as V8 decides.
  }
}
